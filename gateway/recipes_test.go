package gateway_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/recipe"
)

// TestRecipesOverREST: the gateway serves the recipe schema and the recipe
// routes; a recipe text with a write step is refused naming it, a named
// recipe runs and returns its receipts.
func TestRecipesOverREST(t *testing.T) {
	e := newEnv(t)
	res := e.do("GET", "/schemas/recipe-1.json", e.Viewer, nil)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/schema+json" || string(body) != string(recipe.SchemaJSON) {
		t.Fatalf("schema: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if code, _ := status(t, e.do("GET", "/schemas/recipe-1.json", "", nil)); code != http.StatusUnauthorized {
		t.Fatalf("schema without a token: %d", code)
	}

	list := e.callAs(e.Viewer, "GET", "/v1/recipes", nil)
	if rs, _ := list["recipes"].([]any); len(rs) < 6 {
		t.Fatalf("GET /v1/recipes: %v", list)
	}
	if r := e.callAs(e.Viewer, "GET", "/v1/recipes/inspect-repository", nil); str(r, "recipe", "name") != "inspect-repository" || !strings.Contains(str(r, "text"), "git") {
		t.Fatalf("GET /v1/recipes/inspect-repository: %v", r)
	}

	text := "schema_version: \"1\"\nname: w\ntitle: W\nlimits: {timeout_seconds: 10, output_bytes: 4096}\nsteps:\n  - {name: Stamp, argv: [touch, stamp.txt]}\n"
	v := e.call("POST", "/v1/recipes:validate", map[string]any{"text": text})
	if v["valid"] == true || !strings.Contains(str(nth(v["steps"], 0), "problem"), `step 1 ("Stamp") writes`) {
		t.Fatalf("validate a write step: %v", v)
	}
	code, msg := status(t, e.do("POST", "/v1/recipes:run", e.Operator, map[string]any{"text": text}))
	if code != http.StatusBadRequest || !strings.Contains(msg, `step 1 (\"Stamp\") writes`) {
		t.Fatalf("run a write step: %d %s", code, msg)
	}
	// Viewers may look and check, not run.
	if code, _ := status(t, e.do("POST", "/v1/recipes:run", e.Viewer, map[string]any{"name": "read-only-boundary"})); code != http.StatusForbidden {
		t.Fatalf("a viewer ran a recipe: %d", code)
	}

	if err := os.WriteFile(filepath.Join(e.d.Workspace, "service.log"), []byte("FATAL out of memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.call("POST", "/v1/recipes:run", map[string]any{"name": "analyze-logs"})
	steps, _ := r["steps"].([]any)
	if str(r, "status") != "succeeded" || len(steps) != 4 || str(nth(steps, 0), "receipt_id") == "" ||
		!strings.Contains(str(nth(steps, 2), "stdout"), "./service.log:1:FATAL out of memory") {
		t.Fatalf("run analyze-logs: %v", r)
	}
}

// nth is element i of a JSON array (nil when absent).
func nth(a any, i int) any {
	if l, ok := a.([]any); ok && i < len(l) {
		return l[i]
	}
	return nil
}
