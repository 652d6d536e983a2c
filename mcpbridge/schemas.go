package mcpbridge

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolschemas/ holds each tool's input and output schema exactly as they
// are inferred from the tools' Go types, one file each (NAME.input.json,
// NAME.output.json), so that starting needs no JSON decoding: a single
// file of all of them took ~2 ms of every cold start to decode, on the
// path of every tool's registration. TestToolSchemasFile checks them;
// `go test ./mcpbridge -run TestToolSchemasFile -update` rewrites them.
//
//go:embed toolschemas
var toolSchemaFiles embed.FS

// useSchemaFile is false only while the test infers the schemas afresh.
var useSchemaFile = true

// recordSchemas, set only by that test, receives each inferred schema.
var recordSchemas func(tool string, in, out *jsonschema.Schema)

type toolSchema struct {
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output,omitempty"`
}

var toolSchemas = sync.OnceValue(func() map[string]toolSchema {
	entries, err := toolSchemaFiles.ReadDir("toolschemas")
	if err != nil {
		panic("mcpbridge: toolschemas: " + err.Error()) // embedded at build time; caught by every test
	}
	m := make(map[string]toolSchema, len(entries)/2+1)
	for _, e := range entries {
		data, err := toolSchemaFiles.ReadFile("toolschemas/" + e.Name())
		if err != nil {
			panic("mcpbridge: toolschemas: " + err.Error())
		}
		name, kind, _ := strings.Cut(strings.TrimSuffix(e.Name(), ".json"), ".")
		sc := m[name]
		switch kind {
		case "input":
			sc.Input = data
		case "output":
			sc.Output = data
		default:
			panic("mcpbridge: toolschemas: unexpected file " + e.Name())
		}
		m[name] = sc
	}
	return m
})

// hasSchemaFile says whether toolschemas/ has the tool's input schema,
// reading nothing.
func hasSchemaFile(tool string) bool {
	_, err := fs.Stat(toolSchemaFiles, "toolschemas/"+tool+".input.json")
	return err == nil
}

// anyObject is the input schema the SDK is given for a tool whose schemas
// come from the file (see addTool); clients never see it. JSON text, not a
// *jsonschema.Schema: the SDK encodes and decodes a tool's input schema
// again when the tool is added and on every tools/call over streamable
// HTTP (looking for x-mcp-header annotations), and encoding a Schema (a
// struct of some fifty fields, by reflection) cost more than the whole of
// the rest of adding the tools.
var anyObject = json.RawMessage(`{"type":"object"}`)

// withFileSchemas puts each tool's schemas from the file into a tools/list
// answer (the SDK holds the tools with anyObject).
func withFileSchemas(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		lr, ok := res.(*mcp.ListToolsResult)
		if method != "tools/list" || !ok || !useSchemaFile {
			return res, err
		}
		schemas := toolSchemas()
		for i, t := range lr.Tools {
			if sc, ok := schemas[t.Name]; ok {
				listed := *t
				listed.InputSchema = sc.Input
				if len(sc.Output) > 0 {
					// A nil RawMessage in the interface would be sent as
					// "outputSchema": null, which clients refuse.
					listed.OutputSchema = sc.Output
				}
				lr.Tools[i] = &listed
			}
		}
		return lr, err
	}
}

// outputSchema infers a tool's output schema as the SDK does (nil for any).
func outputSchema[Out any](tool string) *jsonschema.Schema {
	rt := reflect.TypeFor[Out]()
	if rt == reflect.TypeFor[any]() {
		return nil
	}
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	schema, err := jsonschema.ForType(rt, &jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("tool %s: output schema: %v", tool, err))
	}
	return schema
}

// typedTool is a tool's resolved schemas, made at its first call.
type typedTool[In, Out any] struct {
	in *jsonschema.Resolved
	// out is the output schema, resolved only when it names defaults to
	// fill in; hasOut says the tool has one (its results carry
	// structuredContent).
	out    *jsonschema.Resolved
	hasOut bool
	// inDefaults, outDefaults: the schema may fill in defaults (it names
	// "default"); without any, the arguments decode straight into In and
	// the output is encoded once, not again after a no-op ApplyDefaults.
	inDefaults, outDefaults bool
}

func resolveTool[In, Out any](name string, sc toolSchema) (*typedTool[In, Out], error) {
	resolve := func(data json.RawMessage) (*jsonschema.Resolved, error) {
		if len(data) == 0 {
			return nil, nil
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, err
		}
		return s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	}
	in, err := resolve(sc.Input)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", name, err)
	}
	hasDefault := func(data json.RawMessage) bool { return bytes.Contains(data, []byte(`"default"`)) }
	tt := &typedTool[In, Out]{in: in, hasOut: len(sc.Output) > 0, inDefaults: hasDefault(sc.Input), outDefaults: hasDefault(sc.Output)}
	if tt.outDefaults {
		if tt.out, err = resolve(sc.Output); err != nil {
			return nil, fmt.Errorf("tool %s: output schema: %w", name, err)
		}
	}
	return tt, nil
}

// call does what the SDK's typed tools do around a handler: the arguments
// are validated (schema defaults applied) and decoded; a handler's error
// becomes an isError result (a JSON-RPC error stays one); the output is
// validated and becomes structuredContent.
func (tt *typedTool[In, Out]) call(ctx context.Context, req *mcp.CallToolRequest, h mcp.ToolHandlerFor[In, Out]) (*mcp.CallToolResult, error) {
	args := map[string]any{}
	if raw := req.Params.Arguments; len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return toolError(fmt.Errorf("validating \"arguments\": unmarshaling arguments: %w", err)), nil
		}
	}
	if tt.inDefaults {
		if err := tt.in.ApplyDefaults(&args); err != nil {
			return toolError(fmt.Errorf("validating \"arguments\": applying schema defaults:\n%w", err)), nil
		}
	}
	if err := tt.in.Validate(args); err != nil {
		return toolError(fmt.Errorf("validating \"arguments\": %v", err)), nil
	}
	var in In
	argData := []byte(req.Params.Arguments)
	if tt.inDefaults || len(argData) == 0 {
		var err error
		if argData, err = json.Marshal(args); err != nil {
			return toolError(err), nil
		}
	}
	if err := json.Unmarshal(argData, &in); err != nil {
		return toolError(err), nil
	}
	res, out, err := h(ctx, req, in)
	if err != nil {
		if wire, ok := err.(*jsonrpc.Error); ok {
			return nil, wire
		}
		return toolError(err), nil
	}
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	if res.InputRequests != nil {
		res.StructuredContent = nil // an input request, not a result
		return res, nil
	}
	var outval any = out
	if rv := reflect.ValueOf(out); rv.Kind() == reflect.Pointer && rv.IsNil() {
		outval = reflect.Zero(rv.Type().Elem()).Interface() // a typed nil is its zero value, not null
		res.StructuredContent = nil
	}
	// reply encoded out already: that encoding is the structuredContent.
	data, encoded := res.StructuredContent.(json.RawMessage)
	if !encoded {
		var err error
		if data, err = json.Marshal(outval); err != nil {
			return nil, fmt.Errorf("marshaling output: %w", err)
		}
	}
	// The output is its Go type encoded, and the schema is inferred from
	// that type (TestToolSchemasFile), so it conforms by construction:
	// decoding and validating it again on every call (a tenth of the
	// bridge's CPU per pair) re-proved a fact of the build. Real clients
	// in the tests (the TypeScript SDK, ts_test.go) check results against
	// the listed schemas. A schema with defaults still has them applied.
	if tt.outDefaults {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("validating tool output: %w", err)
		}
		if m, ok := v.(map[string]any); ok {
			if err := tt.out.ApplyDefaults(&m); err != nil {
				return nil, fmt.Errorf("validating tool output: applying schema defaults:\n%w", err)
			}
			v = m
			if data, err = json.Marshal(m); err != nil {
				return nil, fmt.Errorf("marshalling with defaults: %v", err)
			}
		}
		if err := tt.out.Validate(v); err != nil {
			return nil, fmt.Errorf("validating tool output: %w", err)
		}
	}
	res.StructuredContent = json.RawMessage(data)
	if res.Content == nil {
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(data)}}
	}
	return res, nil
}

func toolError(err error) *mcp.CallToolResult {
	var r mcp.CallToolResult
	r.SetError(err)
	return &r
}
