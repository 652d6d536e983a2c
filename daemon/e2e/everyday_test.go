package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Issue 31, "Nothing ordinary is hard-denied", against a real daemon with
// the sandbox required (Landlock) in a git repository workspace: git stash,
// stash list and pop, commit and merge, timeout, env with an allowed and an
// unlisted assignment, node and python3 --version, run for real. Each runs
// without approval except env FOO=1 (FOO is not in env.allow: it asks, and
// runs once an operator approves); git rebase asks; sudo stays denied with a
// reason that says why even inside the sandbox.
func TestEverydayCommandsRunSandboxed(t *testing.T) {
	requireSandbox(t)
	d := harness.Start(t, harness.Options{Config: "sandbox: required\n"})
	ws := d.Workspace
	gitRepo(t, ws)
	git := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "one\n")
	git("add", "a.txt")
	git("commit", "-q", "-m", "first")
	git("checkout", "-q", "-b", "feature")
	write("b.txt", "feature\n")
	git("add", "b.txt")
	git("commit", "-q", "-m", "feature")
	git("checkout", "-q", "-")
	write("a.txt", "two\n") // a change for git stash

	// run plans argv and runs it; it must not need approval unless ask.
	run := func(ask bool, argv ...string) string {
		t.Helper()
		p := planIn(t, d, ws, argv...)
		switch {
		case ask && p.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL:
			ap, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash})
			if err != nil {
				t.Fatalf("approving %q: %v", argv, err)
			}
			p = ap.Plan
		case p.State != termdv1.PlanState_PLAN_STATE_PLANNED:
			t.Fatalf("%q: %v, want it to run without approval; reasons %q", argv, p.State, p.Decision.Reasons)
		}
		ex, _, out, errOut := runToEnd(t, d.Client, p)
		if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
			t.Fatalf("%q: %v exit %d: %s %s", argv, ex.State, ex.ExitCode, out, errOut)
		}
		return out
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(ws, name))
		return string(b)
	}

	run(false, "git", "stash")
	if got := read("a.txt"); got != "one\n" {
		t.Errorf("after git stash a.txt is %q, want the committed one", got)
	}
	if out := run(false, "/usr/bin/git", "stash", "list"); !strings.Contains(out, "stash@{0}") {
		t.Errorf("git stash list printed %q", out)
	}
	run(false, "git", "stash", "pop")
	if got := read("a.txt"); got != "two\n" {
		t.Errorf("after git stash pop a.txt is %q, want the change back", got)
	}
	run(false, "git", "commit", "-q", "-am", "two")
	run(false, "git", "merge", "-q", "--no-edit", "feature")
	if got := read("b.txt"); got != "feature\n" {
		t.Errorf("after git merge feature b.txt is %q", got)
	}
	run(false, "timeout", "10", "true")
	run(false, "/usr/bin/env", "PORT=9000", "true")
	run(true, "env", "FOO=1", "true")
	if out := run(false, "node", "--version"); !strings.HasPrefix(out, "v") {
		t.Errorf("node --version printed %q", out)
	}
	if out := run(false, "python3", "--version"); !strings.HasPrefix(out, "Python 3") {
		t.Errorf("python3 --version printed %q", out)
	}

	if p := planIn(t, d, ws, "git", "rebase", "feature"); p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Errorf("git rebase: %v, want it to ask (it rewrites history); reasons %q", p.State, p.Decision.Reasons)
	}
	p := planIn(t, d, ws, "sudo", "true")
	if p.State != termdv1.PlanState_PLAN_STATE_BLOCKED || !strings.Contains(strings.Join(p.Decision.Reasons, " "), "even inside the sandbox") {
		t.Errorf("sudo true: %v, want denied saying why even inside the sandbox; reasons %q", p.State, p.Decision.Reasons)
	}
}
