package mcpbridge_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecipeToolsRunANamedRecipe: an agent lists the recipes, runs one in a
// project directory through termd-mcp, and gets each step's output and the
// ids of signed receipts it can fetch.
func TestRecipeToolsRunANamedRecipe(t *testing.T) {
	d := startDaemon(t)
	py := filepath.Join(d.Workspace, "py")
	if err := os.MkdirAll(filepath.Join(py, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(py, "tests", "test_cart.py"), []byte("def test_total():\n    assert 1 + 1 == 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, d, transports[0], &clientRecorder{}, false)

	list, res := call(t, cs, "terminal_recipes", map[string]any{}, false)
	if res.IsError || !strings.Contains(text(res), "discover-python-tests") {
		t.Fatalf("terminal_recipes: %s", text(res))
	}
	if rs, _ := list["recipes"].([]any); len(rs) < 6 {
		t.Fatalf("terminal_recipes lists %d recipes", len(rs))
	}

	out, res := call(t, cs, "terminal_recipe_run", map[string]any{"name": "discover-python-tests", "dir": "py"}, false)
	if res.IsError || str(out, "status") != "succeeded" {
		t.Fatalf("terminal_recipe_run: %s", text(res))
	}
	ids, _ := out["receipt_ids"].([]any)
	steps, _ := out["steps"].([]any)
	if len(ids) == 0 || len(ids) != len(steps) {
		t.Fatalf("%d receipt ids for %d steps: %v", len(ids), len(steps), out)
	}
	var all strings.Builder
	for _, s := range steps {
		all.WriteString(str(s.(map[string]any), "stdout"))
	}
	if !strings.Contains(all.String(), "./tests/test_cart.py:1:def test_total():") {
		t.Fatalf("the run's output lacks the test function:\n%s", all.String())
	}
	rc, res := call(t, cs, "terminal_receipt", map[string]any{"receipt_id": ids[0]}, false)
	if res.IsError || str(rc, "receipt_id") != ids[0] {
		t.Fatalf("the recipe's receipt %v is not readable: %s", ids[0], text(res))
	}

	_, res = call(t, cs, "terminal_recipe_run", map[string]any{"name": "no-such-recipe"}, false)
	if !res.IsError || !strings.Contains(text(res), "inspect-repository") {
		t.Fatalf("an unknown recipe should fail naming the recipes: %s", text(res))
	}
}
