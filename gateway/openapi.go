package gateway

import (
	_ "embed"
	"encoding/json"
	"strings"
	"sync"
)

// generatedOpenAPI is the document protoc-gen-openapiv2 makes from the
// proto (make generate); openAPIExtra holds what the proto cannot say: the
// document's title and version, the bearer security scheme, the gateway's
// own routes (/healthz, /openapi.json, /v1/sse-ticket, /v1/events) and its
// error body.
var (
	//go:embed openapi/termd.swagger.json
	generatedOpenAPI []byte
	//go:embed openapi/extra.json
	openAPIExtra []byte
)

// openAPIDocument is the merged document served at /openapi.json, built on
// first use.
var openAPIDocument = sync.OnceValue(func() []byte {
	doc, err := mergeOpenAPI(generatedOpenAPI, openAPIExtra)
	if err != nil {
		panic("gateway: the embedded OpenAPI documents do not merge: " + err.Error()) // caught by every gateway test
	}
	return doc
})

func mergeOpenAPI(generated, extra []byte) ([]byte, error) {
	var doc, add map[string]any
	if err := json.Unmarshal(generated, &doc); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(extra, &add); err != nil {
		return nil, err
	}
	for _, k := range []string{"info", "securityDefinitions", "security"} {
		doc[k] = add[k]
	}
	for _, k := range []string{"paths", "definitions"} {
		into, _ := doc[k].(map[string]any)
		for name, v := range add[k].(map[string]any) {
			into[name] = v
		}
	}
	doc["tags"] = append(doc["tags"].([]any), add["tags"].([]any)...)
	// Errors: the gateway's body, and the statuses every route can answer.
	errRef := map[string]any{"$ref": "#/definitions/gatewayError"}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			o, ok := op.(map[string]any)
			if !ok {
				continue
			}
			rs, _ := o["responses"].(map[string]any)
			if d, ok := rs["default"].(map[string]any); ok {
				d["schema"] = errRef
				d["description"] = "an error: the HTTP status and what to do"
			}
			if strings.HasPrefix(path, "/v1/") && path != "/v1/sse-ticket" && path != "/v1/events" && path != "/v1/fleet/events" {
				rs["401"] = map[string]any{"description": "missing or invalid bearer token", "schema": errRef}
				if method != "get" {
					rs["403"] = map[string]any{"description": "the token's role may not do this", "schema": errRef}
				}
			}
		}
	}
	refSiblings(doc)
	return json.MarshalIndent(doc, "", "  ")
}

// refSiblings fixes what the generator writes beside a $ref, which Swagger
// ignores: a description is kept through allOf, anything else (a stray
// "type") is dropped.
func refSiblings(v any) {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"]; ok && len(x) > 1 {
			desc, hasDesc := x["description"]
			for k := range x {
				delete(x, k)
			}
			if hasDesc {
				x["allOf"] = []any{map[string]any{"$ref": ref}}
				x["description"] = desc
			} else {
				x["$ref"] = ref
			}
			return
		}
		for _, e := range x {
			refSiblings(e)
		}
	case []any:
		for _, e := range x {
			refSiblings(e)
		}
	}
}
