package recipe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/termd/termd/internal/schemacheck"
	"github.com/termd/termd/internal/schemacheck/schematest"
)

// The recipe schema is checked by internal/schemacheck; a general JSON
// Schema validator (test only) must agree with it on a valid recipe and on
// every mutation of it.
func TestSchemaCheckAgreesWithJSONSchema(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaURL, doc); err != nil {
		t.Fatal(err)
	}
	ref, err := c.Compile(SchemaURL)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := schema()
	if err != nil {
		t.Fatal(err)
	}
	var base map[string]any
	if err := json.Unmarshal([]byte(`{"schema_version": "1", "name": "look-around", "title": "Look", "description": "d", "tags": ["a", "b-1"],
		"limits": {"timeout_seconds": 30, "output_bytes": 4096},
		"steps": [{"name": "l", "why": "w", "argv": ["ls", "-la"], "dir": "src", "ok_exit_codes": [0, 1], "optional": true, "timeout_seconds": 5},
		          {"name": "g", "argv": ["git", "status"]}]}`), &base); err != nil {
		t.Fatal(err)
	}
	many := func(n int, v any) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	seq := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	extra := []any{2, 255, 256, 300, 301, 1023, 1024, 1048576, 1048577, "../up", "/abs", "Bad_Name", "a-", "-a", "ok-name",
		strings.Repeat("a", 24), strings.Repeat("a", 25), strings.Repeat("a", 48), strings.Repeat("a", 49), strings.Repeat("a", 80), strings.Repeat("a", 81),
		[]any{0, 0}, []any{"a", "a"}, []any{""}, []any{"", "x"}, []any{"ls", 5}, seq(8), seq(9), many(16, "x"), many(17, "x"), many(64, "x"), many(65, "x"),
		[]any{map[string]any{"name": "x", "argv": []any{"ls"}}}, many(17, map[string]any{"name": "x", "argv": []any{"ls"}})}
	docs := schematest.Mutations(base, extra...)
	docs["base"] = base
	invalid := 0
	for name, d := range docs {
		raw, _ := json.Marshal(d)
		refInst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		inst, err := schemacheck.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		refErr := ref.Validate(refInst)
		errs := mine.Validate(inst)
		if (refErr == nil) != (len(errs) == 0) {
			t.Fatalf("%s:\n  reference: %v\n  termd: %v\n  %s", name, refErr, errs, raw)
		}
		if len(errs) > 0 {
			invalid++
		}
	}
	t.Logf("%d recipes agree (%d invalid)", len(docs), invalid)
	if invalid == 0 || invalid == len(docs) {
		t.Fatalf("the corpus does not exercise the schema: %d of %d invalid", invalid, len(docs))
	}
}
