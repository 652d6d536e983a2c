package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var updateSchemas = flag.Bool("update", false, "rewrite toolschemas/ from the tools' Go types")

// listSchemas lists a new bridge's tools over an in-memory MCP connection
// and returns each tool's input and output schema as JSON values.
func listSchemas(t *testing.T) map[string]map[string]any {
	t.Helper()
	b := New(Options{})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := b.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, tool := range res.Tools {
		out[tool.Name] = map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema}
	}
	return out
}

// The schemas a client lists are exactly the ones the SDK infers from the
// tools' Go types: toolschemas/ is current and has every tool and no other. After a
// tool's types change: go test ./mcpbridge -run TestToolSchemasFile -update.
func TestToolSchemasFile(t *testing.T) {
	useSchemaFile = false
	var mu sync.Mutex
	file := map[string]toolSchema{}
	recordSchemas = func(tool string, in, out *jsonschema.Schema) {
		mu.Lock()
		defer mu.Unlock()
		var sc toolSchema
		var err error
		if sc.Input, err = json.Marshal(in); err != nil {
			t.Error(err)
		}
		if out != nil {
			if sc.Output, err = json.Marshal(out); err != nil {
				t.Error(err)
			}
		}
		file[tool] = sc
	}
	inferred := listSchemas(t)
	useSchemaFile, recordSchemas = true, nil
	if *updateSchemas {
		writeSchemaFiles(t, file)
		t.Skip("rewrote toolschemas/; build again and run without -update")
	}
	listed := listSchemas(t)
	norm := func(v any) any {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if len(listed) != len(inferred) {
		t.Fatalf("%d tools listed, %d inferred", len(listed), len(inferred))
	}
	for name, want := range inferred {
		if _, ok := toolSchemas()[name]; !ok {
			t.Errorf("tool %s is not in toolschemas/ (run: go test ./mcpbridge -run TestToolSchemasFile -update)", name)
			continue
		}
		if got := listed[name]; !reflect.DeepEqual(norm(got), norm(want)) {
			t.Errorf("tool %s: toolschemas/ differs from its Go types (run: go test ./mcpbridge -run TestToolSchemasFile -update)", name)
		}
	}
	for name := range toolSchemas() {
		if _, ok := inferred[name]; !ok {
			t.Errorf("toolschemas/ has schemas of %s, which is no tool (run: go test ./mcpbridge -run TestToolSchemasFile -update)", name)
		}
	}
}

// writeSchemaFiles replaces toolschemas/ with the schemas in file, compact
// (every tools/list answer compacts them again, and indented text took a
// third longer), properties in the order of the Go fields, as inferred.
func writeSchemaFiles(t *testing.T, file map[string]toolSchema) {
	old, err := filepath.Glob(filepath.Join("toolschemas", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, data json.RawMessage) {
		if err := os.WriteFile(filepath.Join("toolschemas", name), compactLine(t, data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for tool, sc := range file {
		write(tool+".input.json", sc.Input)
		if len(sc.Output) > 0 {
			write(tool+".output.json", sc.Output)
		}
	}
}

// compactLine is data compact, ending in a newline: a schema file's form.
func compactLine(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// The schema files are compact: a tools/list answer compacts each one
// again (encoding/json does so with any JSON text it is given), and an
// indented file made that pass over all of them a third longer, on the
// path of every cold start's first tools/list.
func TestToolSchemaFilesAreCompact(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("toolschemas", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema files: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, compactLine(t, data)) {
			t.Errorf("%s is not compact (run: go test ./mcpbridge -run TestToolSchemasFile -update)", f)
		}
	}
}

// Arguments are still checked against the tool's schema before the handler
// runs (now at a tool's first call): an unknown property, a wrong type and
// a wrong type inside an array are refused with the property named, and
// nothing reaches the daemon (this bridge has none).
func TestToolArgumentsAreValidated(t *testing.T) {
	b := New(Options{})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := b.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"argv": []string{"pwd"}, "shell": true}, "shell"},
		{map[string]any{"argv": "pwd"}, "argv"},
		{map[string]any{"argv": []any{"ls", 3}}, "argv"},
		{map[string]any{"command": "pwd", "env": map[string]any{"A": 1}}, "env"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "terminal_plan", Arguments: c.args})
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		text := ""
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if !res.IsError || !strings.Contains(text, `validating "arguments"`) || !strings.Contains(text, c.want) {
			t.Errorf("%v: isError %v, %q; want a validation error naming %s", c.args, res.IsError, text, c.want)
		}
	}
}

// counted is a tool output that counts how often it is encoded.
type counted struct{ n *int }

func (c counted) MarshalJSON() ([]byte, error) {
	*c.n++
	return []byte(`{"state":"planned","stdout":"x"}`), nil
}

// A result built by reply encodes its output once: the JSON in its text
// and its structuredContent are the same encoding (terminal_plan encoded
// its PlanView twice per call), and a field the summary quotes is left out
// of the text only. Without an output schema, structuredContent is sent all
// the same.
func TestReplyEncodesOutputOnce(t *testing.T) {
	const out = `{"type":"object","properties":{"state":{"type":"string"},"stdout":{"type":"string"}}}`
	for _, c := range []struct {
		name      string
		output    string
		inSummary []string
		wantText  string
	}{
		{"plain", out, nil, `{"state":"planned","stdout":"x"}`},
		{"without what the summary quotes", out, []string{"stdout"}, `{"state":"planned"}`},
		{"no output schema", "", nil, `{"state":"planned","stdout":"x"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := toolSchema{Input: json.RawMessage(`{"type":"object"}`)}
			if c.output != "" {
				sc.Output = json.RawMessage(c.output)
			}
			tt, err := resolveTool[struct{}, counted]("t", sc)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			h := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, counted, error) {
				return reply(counted{&n}, false, "summary", c.inSummary...)
			}
			res, err := tt.call(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, h)
			if err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("the output was encoded %d times, want 1", n)
			}
			if got := res.Content[1].(*mcp.TextContent).Text; got != c.wantText {
				t.Errorf("text JSON %s, want %s", got, c.wantText)
			}
			// structuredContent is sent with or without a listed output
			// schema (only terminal_run lists one).
			got, _ := json.Marshal(res.StructuredContent)
			if want := `{"state":"planned","stdout":"x"}`; string(got) != want {
				t.Errorf("structuredContent %s, want %s", got, want)
			}
		})
	}
}
