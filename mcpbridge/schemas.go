package mcpbridge

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolschemas.json holds each tool's input and output schema exactly as
// they are inferred from the tools' Go types (TestToolSchemasFile checks
// it; `go test ./mcpbridge -run TestToolSchemasFile -update` rewrites it).
//
//go:embed toolschemas.json
var toolSchemasFile []byte

// useSchemaFile is false only while the test infers the schemas afresh.
var useSchemaFile = true

// recordSchemas, set only by that test, receives each inferred schema.
var recordSchemas func(tool string, in, out *jsonschema.Schema)

type toolSchema struct {
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output,omitempty"`
}

var toolSchemas = sync.OnceValue(func() map[string]toolSchema {
	var m map[string]toolSchema
	if err := json.Unmarshal(toolSchemasFile, &m); err != nil {
		panic("mcpbridge: toolschemas.json: " + err.Error()) // embedded at build time; caught by every test
	}
	return m
})

// anyObject is the input schema the SDK is given for a tool whose schemas
// come from the file (see addTool); clients never see it. A
// *jsonschema.Schema, because the SDK decodes any other kind again.
var anyObject = &jsonschema.Schema{Type: "object"}

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
				listed.InputSchema, listed.OutputSchema = sc.Input, sc.Output
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
	if !tt.hasOut || res.InputRequests != nil {
		return res, nil
	}
	var outval any = out
	if rv := reflect.ValueOf(out); rv.Kind() == reflect.Pointer && rv.IsNil() {
		outval = reflect.Zero(rv.Type().Elem()).Interface() // a typed nil is its zero value, not null
	}
	data, err := json.Marshal(outval)
	if err != nil {
		return nil, fmt.Errorf("marshaling output: %w", err)
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
