package recipes_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// fixtureRepo copies testdata/repo into the workspace as a git repository
// with one commit on main, then leaves work in progress: an unstaged change,
// a staged file and an untracked one.
func fixtureRepo(t *testing.T, workspace string) string {
	t.Helper()
	repo := filepath.Join(workspace, "shop")
	err := filepath.WalkDir("testdata/repo", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/repo", p)
		dst := filepath.Join(repo, rel)
		if e.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Fixture", "GIT_AUTHOR_EMAIL=fixture@example.com",
			"GIT_COMMITTER_NAME=Fixture", "GIT_COMMITTER_EMAIL=fixture@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "shop: orders, web cart, price tools")
	appendFile(t, filepath.Join(repo, "orders", "orders.go"), "\n// Max is the largest quantity one line may order.\nconst Max = 99\n")
	writeFile(t, filepath.Join(repo, "notes", "todo.md"), "- retry payment gateway timeouts\n")
	git("add", "notes/todo.md")
	writeFile(t, filepath.Join(repo, "scratch.txt"), "untracked\n")
	return repo
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// output is every step's stdout and stderr, joined.
func output(r *termdv1.RunRecipeResponse) string {
	var b strings.Builder
	for _, s := range r.Steps {
		b.WriteString(s.Stdout)
		b.WriteString(s.Stderr)
	}
	return b.String()
}

// checkReceipts asserts each step left a receipt of an inspect-mode,
// read-only execution.
func checkReceipts(t *testing.T, c *client.Client, r *termdv1.RunRecipeResponse) {
	t.Helper()
	for _, s := range r.Steps {
		if s.ReceiptId == "" {
			t.Fatalf("step %d (%s) has no receipt id", s.Index, s.Name)
		}
		resp, err := c.Receipts.GetReceipt(ctxT(t, 30*time.Second), &termdv1.GetReceiptRequest{ReceiptId: s.ReceiptId})
		if err != nil {
			t.Fatalf("receipt of step %d: %v", s.Index, err)
		}
		var rc struct {
			Mode    string `json:"mode"`
			PlanID  string `json:"plan_id"`
			Sandbox struct {
				Profile string `json:"profile"`
			} `json:"sandbox"`
		}
		if err := json.Unmarshal([]byte(resp.ReceiptJson), &rc); err != nil {
			t.Fatal(err)
		}
		if rc.Mode != "inspect" || rc.Sandbox.Profile != "read-only" || rc.PlanID != s.PlanId {
			t.Fatalf("step %d receipt: mode %q, sandbox %q, plan %s (want inspect, read-only, %s)", s.Index, rc.Mode, rc.Sandbox.Profile, rc.PlanID, s.PlanId)
		}
	}
}

// TestCatalogRecipesRunOnFixture runs every built-in recipe against a
// fixture repository through a real termd and checks what a user would
// read in its output. A recipe added to the catalog without a case here
// fails the test.
func TestCatalogRecipesRunOnFixture(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	repo := fixtureRepo(t, d.Workspace)
	cases := map[string]struct {
		dir  string
		want []string
	}{
		"inspect-repository": {repo, []string{
			"## main", " M orders/orders.go", "A  notes/todo.md", "?? scratch.txt",
			"(HEAD -> main) shop: orders, web cart, price tools", "orders/orders.go | 3 +++", "notes/todo.md | 1 +", "* main ",
			"docker-compose.yml",
		}},
		"discover-go-tests": {repo, []string{
			"example.com/shop", "go1.", "example.com/shop/orders tests=1 xtests=0", "example.com/shop/cmd/shopd tests=0",
			"./orders/orders_test.go:5:func TestParseOrder(", "func BenchmarkParseOrder(", "func FuzzParseOrder(",
			"example.com/shop/legacy tests=0", "legacy/legacy.go:5:8: no required module provides package example.com/shop/billing",
		}},
		"discover-js-tests": {filepath.Join(repo, "web"), []string{
			`"test": "node --test test/"`, "./jest.config.js", "./test/cart.test.js",
			"./test/cart.test.js:5:describe('cart total'", "it('adds price times quantity'", "it.skip('applies discounts'",
		}},
		"discover-python-tests": {filepath.Join(repo, "py"), []string{
			"./pyproject.toml", "./conftest.py", "[tool.pytest.ini_options]", `testpaths = ["tests"]`,
			"./tests/test_prices.py", "def test_price_lookup(catalog)", "class TestRounding", "def test_rounds_half_up", "@pytest.fixture",
		}},
		"analyze-logs": {repo, []string{
			"./logs/shopd.log\n", "./logs/shopd.log.1\n", "./logs/worker.log\n",
			"./logs/shopd.log:2\n", "./logs/worker.log:0\n", "./logs/shopd.log.1:1\n",
			"./logs/shopd.log:3:2026-11-30T10:01:00Z ERROR payment gateway timeout order=1042",
			"FATAL could not open database", "./logs/shopd.log:2:2026-11-30T10:00:05Z WARN slow query",
		}},
		"verify-port-config": {repo, []string{
			"./.env.example:1:SHOP_PORT=8080", `"8081:8080"`, "./Dockerfile:3:EXPOSE 8080", "./deploy/config.yaml:3:  port: 9090",
			"ListenAndServe", "process.env.SHOP_WEB_PORT",
		}},
		"read-only-boundary": {repo, []string{
			"uid=", repo + "\n", "pre-commit.sample", "core.bare=false",
		}},
	}
	list, err := d.Client.Recipes.ListRecipes(ctxT(t, 30*time.Second), &termdv1.ListRecipesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list.Recipes {
		if e.Error != "" {
			t.Errorf("built-in recipe %s does not parse: %s", e.Recipe.Name, e.Error)
		}
		names = append(names, e.Recipe.Name)
		if _, ok := cases[e.Recipe.Name]; !ok {
			t.Errorf("recipe %s has no fixture case in this test", e.Recipe.Name)
		}
	}
	if len(names) < 6 {
		t.Fatalf("the catalog holds %d recipes (%v); at least six ship", len(names), names)
	}
	sort.Strings(names)
	for _, name := range names {
		tc := cases[name]
		t.Run(name, func(t *testing.T) {
			v, err := d.Client.Recipes.ValidateRecipe(ctxT(t, 30*time.Second), &termdv1.ValidateRecipeRequest{Name: name, Dir: tc.dir})
			if err != nil {
				t.Fatal(err)
			}
			if !v.Valid {
				t.Fatalf("%s does not validate in %s: %v", name, tc.dir, v.Problems)
			}
			r, err := d.Client.Recipes.RunRecipe(ctxT(t, 3*time.Minute), &termdv1.RunRecipeRequest{Name: name, Dir: tc.dir})
			if err != nil {
				t.Fatal(err)
			}
			out := output(r)
			if r.Status != "succeeded" || len(r.Steps) != len(v.Steps) {
				t.Fatalf("%s: %s after %d of %d steps: %v\n%s", name, r.Status, len(r.Steps), len(v.Steps), r.Problems, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s output lacks %q:\n%s", name, w, out)
				}
			}
			checkReceipts(t, d.Client, r)
		})
	}
}

// run is RunRecipe of a recipe text in dir.
func run(t *testing.T, c *client.Client, text, dir string) (*termdv1.RunRecipeResponse, error) {
	t.Helper()
	return c.Recipes.RunRecipe(ctxT(t, 2*time.Minute), &termdv1.RunRecipeRequest{Text: text, Dir: dir})
}

func validate(t *testing.T, c *client.Client, text, dir string) *termdv1.ValidateRecipeResponse {
	t.Helper()
	v, err := c.Recipes.ValidateRecipe(ctxT(t, 30*time.Second), &termdv1.ValidateRecipeRequest{Text: text, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const header = "schema_version: \"1\"\nname: probe\ntitle: Probe\nlimits: {timeout_seconds: 30, output_bytes: 65536}\nsteps:\n"

// TestRecipeStepsDecidedByLivePolicy: a write, a denied and an asking step
// each fail validation in the run's words, a run of such a recipe starts
// nothing, and a policy change after validation is seen by the run.
func TestRecipeStepsDecidedByLivePolicy(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	c := d.Client
	cases := []struct {
		step, want string
	}{
		{"  - {name: Leave a marker, argv: [touch, marker.txt]}\n", `step 2 ("Leave a marker") writes ` + filepath.Join(d.Workspace, "marker.txt")},
		{"  - {name: Shell, argv: [sh, -c, \"touch marker.txt\"]}\n", "step 2 is blocked: sh -c runs a shell command string"},
		{"  - {name: System logs, argv: [ls, /var/log]}\n", "step 2 unexpectedly requires approval: read of /var/log outside the workspace roots"},
	}
	for _, tc := range cases {
		text := header + "  - {name: List, argv: [ls]}\n" + tc.step
		v := validate(t, c, text, "")
		if v.Valid || len(v.Problems) != 1 || !strings.Contains(v.Problems[0], tc.want) {
			t.Fatalf("validate: valid=%v problems=%q, want one containing %q", v.Valid, v.Problems, tc.want)
		}
		if v.Steps[0].Problem != "" || v.Steps[1].Problem == "" {
			t.Fatalf("the problem belongs to step 2: %+v", v.Steps)
		}
		_, err := run(t, c, text, "")
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("run: %v, want FAILED_PRECONDITION with %q", err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "marker.txt")); !os.IsNotExist(err) {
		t.Fatalf("a refused recipe wrote its marker: %v", err)
	}
	plans, err := c.Plans.ListPlans(ctxT(t, 30*time.Second), &termdv1.ListPlansRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans.Plans) != 0 {
		t.Fatalf("refused recipes left %d plans (the first step must not run either)", len(plans.Plans))
	}

	// The policy is read live: a project policy that forbids git, added
	// after inspect-repository validated, stops the next validation and run.
	repo := fixtureRepo(t, d.Workspace)
	if v, err := c.Recipes.ValidateRecipe(ctxT(t, 30*time.Second), &termdv1.ValidateRecipeRequest{Name: "inspect-repository", Dir: repo}); err != nil || !v.Valid {
		t.Fatalf("inspect-repository before the project policy: %v %v", err, v.GetProblems())
	}
	writeFile(t, filepath.Join(d.Workspace, ".termd", "policy.yaml"),
		"version: 1\nkind: project\nname: no-git\nrules:\n  - {id: project.no-git, program: git, decision: deny, risk: high, reason: \"this project forbids git\"}\n")
	if _, err := c.Policy.ReloadPolicy(ctxT(t, 30*time.Second), &termdv1.ReloadPolicyRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Recipes.RunRecipe(ctxT(t, time.Minute), &termdv1.RunRecipeRequest{Name: "inspect-repository", Dir: repo})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "step 1 is blocked: ") || !strings.Contains(err.Error(), "this project forbids git") {
		t.Fatalf("run under the new project policy: %v", err)
	}
}

// TestRecipeLimitsAndFailures: the output budget cuts output, the time limit
// ends a long step, a failed step stops the run unless it is optional.
func TestRecipeLimitsAndFailures(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	c := d.Client
	writeFile(t, filepath.Join(d.Workspace, "big.txt"), strings.Repeat("0123456789abcdef\n", 300)) // 5100 bytes

	budget := "schema_version: \"1\"\nname: budget\ntitle: B\nlimits: {timeout_seconds: 30, output_bytes: 2048}\nsteps:\n" +
		"  - {name: Big, argv: [cat, big.txt]}\n  - {name: Again, argv: [cat, big.txt]}\n"
	r, err := run(t, c, budget, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "succeeded" || len(r.Steps) != 2 || len(r.Steps[0].Stdout) != 2048 || !r.Steps[0].Truncated || r.Steps[1].Stdout != "" || !r.Steps[1].Truncated {
		t.Fatalf("output budget 2048: status %s, step outputs %d/%d bytes, truncated %v/%v", r.Status, len(r.Steps[0].Stdout), len(r.Steps[1].Stdout), r.Steps[0].Truncated, r.Steps[1].Truncated)
	}

	start := time.Now()
	slow := "schema_version: \"1\"\nname: slow\ntitle: S\nlimits: {timeout_seconds: 2, output_bytes: 2048}\nsteps:\n" +
		"  - {name: Wait, argv: [sleep, \"30\"]}\n  - {name: After, argv: [ls]}\n"
	r, err = run(t, c, slow, "")
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("a recipe with a 2 s limit took %v", took)
	}
	if r.Status != "failed" || len(r.Steps) != 1 || r.Steps[0].Status != "timed_out" || !strings.Contains(strings.Join(r.Problems, ";"), "step 1 (\"Wait\") timed_out") {
		t.Fatalf("time limit: %s %v %v", r.Status, r.Steps, r.Problems)
	}

	failing := header +
		"  - {name: Missing, argv: [ls, no-such-file], optional: true}\n" +
		"  - {name: Missing again, argv: [ls, no-such-file]}\n" +
		"  - {name: Never, argv: [ls]}\n"
	r, err = run(t, c, failing, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "failed" || len(r.Steps) != 2 || r.Steps[0].Ok || r.Steps[1].ExitCode != 2 ||
		!strings.Contains(strings.Join(r.Problems, ";"), `step 2 ("Missing again") failed with exit code 2`) {
		t.Fatalf("failed step: %s %d steps %v", r.Status, len(r.Steps), r.Problems)
	}
	if !strings.Contains(r.Steps[1].Stderr, "no-such-file") {
		t.Fatalf("the failing step's stderr is returned: %q", r.Steps[1].Stderr)
	}
}

// TestOperatorRecipeDirectory: recipes_dir adds recipes, replaces a
// built-in of the same name, and lists a broken file with its error.
func TestOperatorRecipeDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "list-root.yaml"), "schema_version: \"1\"\nname: list-root\ntitle: List the root\nlimits: {timeout_seconds: 10, output_bytes: 4096}\nsteps:\n  - {name: ls, argv: [ls, \"-1\"]}\n")
	writeFile(t, filepath.Join(dir, "broken.yaml"), "schema_version: \"1\"\nname: broken\ntitle: B\nsteps: []\n")
	writeFile(t, filepath.Join(dir, "inspect-repository.json"), `{"schema_version":"1","name":"inspect-repository","title":"Ours","limits":{"timeout_seconds":10,"output_bytes":4096},"steps":[{"name":"status","argv":["git","status"]}]}`)
	d := harness.Start(t, harness.Options{Config: "recipes_dir: " + dir + "\n"})
	writeFile(t, filepath.Join(d.Workspace, "hello.txt"), "hi\n")
	list, err := d.Client.Recipes.ListRecipes(ctxT(t, 30*time.Second), &termdv1.ListRecipesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*termdv1.RecipeEntry{}
	for _, e := range list.Recipes {
		got[e.Recipe.Name] = e
	}
	if e := got["broken"]; e == nil || !strings.Contains(e.Error, "limits") {
		t.Fatalf("broken recipe listed as %v", e)
	}
	if e := got["inspect-repository"]; e == nil || e.Recipe.Title != "Ours" || e.Recipe.Source != filepath.Join(dir, "inspect-repository.json") {
		t.Fatalf("operator recipe should replace the built-in: %v", e)
	}
	if list.OperatorDir != dir || got["discover-go-tests"] == nil {
		t.Fatalf("operator dir %q; built-ins still listed: %v", list.OperatorDir, got["discover-go-tests"] != nil)
	}
	r, err := d.Client.Recipes.RunRecipe(ctxT(t, time.Minute), &termdv1.RunRecipeRequest{Name: "list-root"})
	if err != nil || r.Status != "succeeded" || !strings.Contains(output(r), "hello.txt") {
		t.Fatalf("operator recipe run: %v %v", err, r)
	}
	if _, err := d.Client.Recipes.RunRecipe(ctxT(t, time.Minute), &termdv1.RunRecipeRequest{Name: "broken"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("running a broken recipe: %v", err)
	}
	if _, err := d.Client.Recipes.GetRecipe(ctxT(t, time.Minute), &termdv1.GetRecipeRequest{Name: "nope"}); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "list-root") {
		t.Fatalf("unknown recipe: %v", err)
	}
}
