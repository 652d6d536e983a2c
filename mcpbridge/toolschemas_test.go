package mcpbridge

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var updateSchemas = flag.Bool("update", false, "rewrite toolschemas.json from the tools' Go types")

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
// tools' Go types: toolschemas.json is current and has every tool. After a
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
		// Properties keep the order of the Go fields, as inferred.
		data, err := json.MarshalIndent(file, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("toolschemas.json", append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skip("rewrote toolschemas.json; build again and run without -update")
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
			t.Errorf("tool %s is not in toolschemas.json (run: go test ./mcpbridge -run TestToolSchemasFile -update)", name)
			continue
		}
		if got := listed[name]; !reflect.DeepEqual(norm(got), norm(want)) {
			t.Errorf("tool %s: toolschemas.json differs from its Go types (run: go test ./mcpbridge -run TestToolSchemasFile -update)", name)
		}
	}
}
