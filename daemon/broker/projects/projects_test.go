package projects

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/metrics"
	"github.com/termd/termd/daemon/policy"
)

const (
	noRm      = "version: 1\nkind: project\nname: no-rm\nrules:\n  - {id: project.no-rm, program: rm, decision: deny, risk: high, reason: \"this project forbids rm\"}\n"
	wide      = "version: 1\nkind: project\nname: wide\nrules:\n  - {id: project.sh, program: sh, decision: allow, risk: low, reason: \"let me\"}\n"
	layerFile = ".termd/policy.yaml"
)

// fixture is two workspaces under a real policy engine reading the default
// policy from a file, with the real metrics recorder.
type fixture struct {
	p          *Projects
	ws1, ws2   string
	systemFile string
	cfg        *config.Config
	rec        *metrics.Recorder
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ws1: filepath.Join(root, "ws1"), ws2: filepath.Join(root, "ws2"), systemFile: filepath.Join(root, "policy.yaml"), rec: metrics.New()}
	for _, ws := range []string{f.ws1, f.ws2} {
		if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("notes\n"), 0o644)
	}
	if err := os.WriteFile(f.systemFile, policy.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, err := policy.NewEngine(f.systemFile)
	if err != nil {
		t.Fatal(err)
	}
	f.cfg = &config.Config{ProjectPolicy: layerFile, Workspaces: []string{f.ws1, f.ws2}}
	f.p = New(Deps{Config: func() *config.Config { return f.cfg }, Policy: eng, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: f.rec})
	return f
}

func (f *fixture) write(t *testing.T, ws, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(ws, ".termd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, layerFile), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) decide(cwd string, argv ...string) policy.Explanation {
	return f.p.Decide(policy.Request{Argv: argv, Cwd: cwd}, policy.Context{Workspaces: f.cfg.Workspaces})
}

func TestProjectPolicyNarrowsOnlyItsWorkspace(t *testing.T) {
	f := newFixture(t)
	f.p.Load()
	if ex := f.decide(f.ws1, "rm", "notes.txt"); ex.Verdict == policy.Deny {
		t.Fatalf("without a project policy rm of a workspace file is not denied: %v", ex.Reasons)
	}
	f.write(t, f.ws1, noRm)
	if ex := f.decide(f.ws1, "rm", "notes.txt"); ex.Verdict == policy.Deny {
		t.Fatalf("a project policy is read only by Load: %v", ex.Reasons)
	}
	f.p.Load()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Join(f.ws1, "sub"), link); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{f.ws1, filepath.Join(f.ws1, "sub"), link} {
		ex := f.decide(cwd, "rm", "notes.txt")
		if ex.Verdict != policy.Deny || !strings.Contains(strings.Join(ex.Reasons, "; "), "this project forbids rm") {
			t.Fatalf("in %s the project policy should deny rm: %v %v", cwd, ex.Verdict, ex.Reasons)
		}
		if !f.p.Narrowed(ex.PolicyVersion) {
			t.Fatalf("the decision in %s was made by the narrowed policy %s, Narrowed should say so", cwd, ex.PolicyVersion)
		}
	}
	if ex := f.decide(f.ws1, "ls"); ex.Verdict == policy.Deny {
		t.Fatalf("ls still runs under the project policy: %v", ex.Reasons)
	}
	ex := f.decide(f.ws2, "rm", "notes.txt")
	if ex.Verdict == policy.Deny {
		t.Fatalf("the other workspace keeps the system policy: %v", ex.Reasons)
	}
	if f.p.Narrowed(ex.PolicyVersion) {
		t.Fatalf("the system policy %s is not a narrowed one", ex.PolicyVersion)
	}
	// A sibling directory whose name starts like the workspace is not in it.
	if ex := f.decide(f.ws1+"x", "rm", "notes.txt"); strings.Contains(strings.Join(ex.Reasons, "; "), "this project forbids rm") {
		t.Fatalf("%sx is not inside %s: %v", f.ws1, f.ws1, ex.Reasons)
	}
	os.Remove(filepath.Join(f.ws1, layerFile))
	f.p.Load()
	if ex := f.decide(f.ws1, "rm", "notes.txt"); ex.Verdict == policy.Deny {
		t.Fatalf("without the file, the system policy applies again: %v", ex.Reasons)
	}
}

func TestBadProjectPolicyFailsClosedInItsWorkspace(t *testing.T) {
	for name, body := range map[string]string{"widening": wide, "invalid": "version: 1\nkind: project\nrules: [\n"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.write(t, f.ws1, body)
			f.p.Load()
			ex := f.decide(f.ws1, "ls")
			if ex.Verdict != policy.Deny || ex.Risk != policy.RiskHigh || ex.Decision.Verdict != policy.Deny {
				t.Fatalf("with a %s project policy nothing runs in its workspace: %v %v", name, ex.Verdict, ex.Reasons)
			}
			if !strings.Contains(strings.Join(ex.Reasons, "; "), "the project policy "+filepath.Join(f.ws1, layerFile)+" is invalid") {
				t.Fatalf("the reason should name the file and say it is invalid: %v", ex.Reasons)
			}
			if last := ex.Steps[len(ex.Steps)-1]; last.Name != "project-policy" || last.Outcome != "deny" {
				t.Fatalf("the last step should be the project policy's deny: %+v", last)
			}
			if ex := f.decide(f.ws2, "ls"); ex.Verdict == policy.Deny {
				t.Fatalf("the other workspace is not affected: %v", ex.Reasons)
			}
		})
	}
}

func TestProjectPolicyPathsAreEveryWorkspacesFile(t *testing.T) {
	f := newFixture(t)
	got := f.p.Paths()
	want := []string{filepath.Join(f.ws1, layerFile), filepath.Join(f.ws2, layerFile)}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Paths = %q, want %q (protected whether or not the file exists)", got, want)
	}
	f.cfg.ProjectPolicy = ""
	f.write(t, f.ws1, noRm)
	f.p.Load()
	if got := f.p.Paths(); got != nil {
		t.Fatalf("with project_policy turned off there is nothing to protect: %q", got)
	}
	if ex := f.decide(f.ws1, "rm", "notes.txt"); ex.Verdict == policy.Deny {
		t.Fatalf("with project_policy turned off the file is not read: %v", ex.Reasons)
	}
}

func TestReloadRereadsLayersAndKeepsTheLastGoodPolicy(t *testing.T) {
	f := newFixture(t)
	f.p.Load()
	f.write(t, f.ws1, noRm)
	res, err := f.p.Reload()
	if err != nil || res.Changed || res.Version != res.PreviousVersion {
		t.Fatalf("an unchanged system policy reloads unchanged: %+v %v", res, err)
	}
	if ex := f.decide(f.ws1, "rm", "notes.txt"); ex.Verdict != policy.Deny {
		t.Fatalf("Reload should read the project policy written since: %v", ex.Reasons)
	}
	good := res.Version
	if err := os.WriteFile(f.systemFile, []byte("version: 1\nrules: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(f.ws1, layerFile))
	_, err = f.p.Reload()
	if errdefs.KindOf(err) != errdefs.KindInvalid || !strings.Contains(err.Error(), "the last good policy ("+good+") stays active") {
		t.Fatalf("a bad system policy is refused, naming the policy kept: %v", err)
	}
	if ex := f.decide(f.ws1, "rm", "notes.txt"); ex.Verdict != policy.Deny {
		t.Fatalf("a refused reload leaves the project layers as they were: %v", ex.Reasons)
	}
	text := strings.Replace(string(policy.DefaultYAML()), "name: termd-default", "name: termd-edited", 1)
	if err := os.WriteFile(f.systemFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = f.p.Reload()
	if err != nil || !res.Changed || res.PreviousVersion != good || res.Version == good {
		t.Fatalf("an edited system policy reloads as changed: %+v %v", res, err)
	}
	if ex := f.decide(f.ws1, "rm", "notes.txt"); ex.Verdict == policy.Deny {
		t.Fatalf("the removed project policy no longer applies: %v", ex.Reasons)
	}
	body := httptestGet(t, f.rec)
	for _, want := range []string{`termd_policy_reloads_total{result="ok"} 2`, `termd_policy_reloads_total{result="refused"} 1`} {
		if !strings.Contains(body, want) {
			t.Fatalf("metrics should count every reload (%s):\n%s", want, body)
		}
	}
}

func httptestGet(t *testing.T, rec *metrics.Recorder) string {
	t.Helper()
	w := httptest.NewRecorder()
	rec.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	return w.Body.String()
}
