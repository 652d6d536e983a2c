package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecipeVerbs drives termctl recipe list, show, validate and run against
// a real termd: the catalog lists, a file with a write step is refused
// naming the step (locally malformed files before termd is asked), and a
// run prints each step's output and receipt.
func TestRecipeVerbs(t *testing.T) {
	d := start(t)
	if err := os.MkdirAll(filepath.Join(d.Workspace, "svc", "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Workspace, "svc", "logs", "api.log"), []byte("ERROR upstream refused\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out := ok(t, d, "recipe", "list")
	for _, name := range []string{"inspect-repository", "discover-go-tests", "discover-js-tests", "discover-python-tests", "analyze-logs", "verify-port-config", "read-only-boundary"} {
		if !strings.Contains(out, name) {
			t.Errorf("recipe list lacks %s:\n%s", name, out)
		}
	}
	var list []struct {
		Name  string `json:"name"`
		Steps int    `json:"steps"`
	}
	if err := json.Unmarshal([]byte(ok(t, d, "recipe", "list", "-o", "json")), &list); err != nil || len(list) < 6 || list[0].Steps == 0 {
		t.Fatalf("recipe list -o json: %v %v", err, list)
	}
	if out := ok(t, d, "recipe", "show", "analyze-logs"); !strings.Contains(out, "# source: built-in") || !strings.Contains(out, "name: analyze-logs") {
		t.Fatalf("recipe show:\n%s", out)
	}

	out = ok(t, d, "recipe", "validate", "analyze-logs", "--dir", "svc")
	if !strings.Contains(out, "recipe analyze-logs is valid: 4 steps") || !strings.Contains(out, filepath.Join(d.Workspace, "svc")) {
		t.Fatalf("validate:\n%s", out)
	}

	bad := filepath.Join(d.Dir, "writes.yaml")
	os.WriteFile(bad, []byte("schema_version: \"1\"\nname: writes\ntitle: W\nlimits: {timeout_seconds: 10, output_bytes: 4096}\nsteps:\n  - {name: List, argv: [ls]}\n  - {name: Stamp, argv: [touch, stamp.txt]}\n"), 0o644)
	_, errOut := expect(t, d, 1, "recipe", "validate", bad)
	if !strings.Contains(errOut, `step 2 ("Stamp") writes `+filepath.Join(d.Workspace, "stamp.txt")) {
		t.Fatalf("validate of a write step:\n%s", errOut)
	}
	_, errOut = expect(t, d, 125, "recipe", "run", bad)
	if !strings.Contains(errOut, `step 2 ("Stamp") writes`) {
		t.Fatalf("run of a write step:\n%s", errOut)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "stamp.txt")); !os.IsNotExist(err) {
		t.Fatal("a refused recipe ran its write step")
	}
	malformed := filepath.Join(d.Dir, "malformed.json")
	os.WriteFile(malformed, []byte(`{"schema_version":"1","name":"m","title":"M","limits":{"timeout_seconds":10,"output_bytes":4096},"steps":[{"name":"x","argv":[]}]}`), 0o644)
	_, errOut = expect(t, d, 1, "recipe", "validate", malformed)
	if !strings.Contains(errOut, "does not match the recipe schema") || !strings.Contains(errOut, "steps/0/argv") {
		t.Fatalf("malformed recipe:\n%s", errOut)
	}

	out = ok(t, d, "recipe", "run", "analyze-logs", "--dir", "svc")
	if !strings.Contains(out, "./logs/api.log:1:ERROR upstream refused") || !strings.Contains(out, "recipe analyze-logs: succeeded, 4 steps") || strings.Count(out, "; receipt ") != 4 {
		t.Fatalf("recipe run:\n%s", out)
	}
	if _, errOut := expect(t, d, 125, "recipe", "run", "no-such-recipe"); !strings.Contains(errOut, `no recipe named "no-such-recipe"`) {
		t.Fatalf("unknown recipe:\n%s", errOut)
	}
}
