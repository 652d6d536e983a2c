package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// planIn plans argv in confirm mode with dir as its working directory.
func planIn(t *testing.T, d *harness.Daemon, dir string, argv ...string) *termdv1.Plan {
	t.Helper()
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: argv, Cwd: dir, Mode: termdv1.Mode_MODE_CONFIRM}})
	if err != nil {
		t.Fatalf("plan %q: %v", argv, err)
	}
	return resp.Plan
}

func planStep(p *termdv1.Plan, name string) *termdv1.PolicyStep {
	for _, s := range p.Decision.GetSteps() {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// The policy setting sandboxed_workspace_writes against a real daemon: with
// the sandbox enforced (Landlock) and the default (allow), sed -i, mkdir and
// mv in the workspace run without asking, and their receipts say why; with
// the setting on ask, or the sandbox off, they ask as before; a write to
// .git/hooks, outside the workspace or to an entry file still asks or is
// denied.
func TestSandboxedWorkspaceWrites(t *testing.T) {
	requireSandbox(t)
	edits := func(ws string) [][]string {
		if err := os.WriteFile(filepath.Join(ws, "calc.go"), []byte("return len(xs)-1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "NOTES.md"), []byte("notes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return [][]string{{"sed", "-i", "s/len(xs)-1/len(xs)/", "calc.go"}, {"mkdir", "-p", "docs"}, {"mv", "NOTES.md", "docs/NOTES.md"}}
	}

	d := harness.Start(t, harness.Options{Config: "sandbox: required\n"})
	gitRepo(t, d.Workspace)
	for _, argv := range edits(d.Workspace) {
		p := planIn(t, d, d.Workspace, argv...)
		if p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
			t.Fatalf("%q under the enforced sandbox: %v %v, want it to run without approval", argv, p.State, p.Decision.Reasons)
		}
		st := planStep(p, "sandboxed-workspace-write")
		if st == nil || st.Outcome != "allow" || st.Detail != "writes confined to "+d.Workspace+" by Landlock" {
			t.Errorf("%q: step %v, want sandboxed-workspace-write: allow, writes confined to %s by Landlock", argv, st, d.Workspace)
		}
		ex, rec, _, errOut := runToEnd(t, d.Client, p)
		if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
			t.Fatalf("%q: %v %s %s", argv, ex.State, ex.Error, errOut)
		}
		r := receiptJSON(t, d.Client, rec.Id)
		pol, _ := r["policy"].(map[string]any)
		if pol["requires_approval"] != false || !strings.Contains(strings.Join(toStrings(pol["reasons"]), " "), "sandboxed-workspace-write: allowed without approval, writes confined to "+d.Workspace+" by Landlock") {
			t.Errorf("%q: the receipt's policy %v does not say why it ran without approval", argv, pol)
		}
		if sb, _ := r["sandbox"].(map[string]any); sb["profile"] != "workspace-write" || sb["level"] != "full" {
			t.Errorf("%q: the receipt's sandbox %v, want workspace-write enforced in full", argv, sb)
		}
	}
	if b, err := os.ReadFile(filepath.Join(d.Workspace, "calc.go")); err != nil || string(b) != "return len(xs)\n" {
		t.Errorf("sed -i did not edit calc.go: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "docs", "NOTES.md")); err != nil {
		t.Errorf("mkdir + mv did not happen: %v", err)
	}

	// What the rule never covers, under the same daemon.
	hook := filepath.Join(d.Workspace, ".git", "hooks", "pre-commit")
	if err := os.WriteFile(filepath.Join(d.Workspace, "package.json"), []byte(`{"version": "0.1.0"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		argv  []string
		state termdv1.PlanState
		why   string
	}{
		{[]string{"touch", hook}, termdv1.PlanState_PLAN_STATE_BLOCKED, ".git/hooks"},
		{[]string{"sed", "-i", "s/a/b/", ".git/hooks/pre-commit"}, termdv1.PlanState_PLAN_STATE_BLOCKED, ".git/hooks"},
		{[]string{"touch", filepath.Join(t.TempDir(), "outside")}, termdv1.PlanState_PLAN_STATE_BLOCKED, "outside the workspace"},
		{[]string{"sed", "-i", "s/0.1.0/0.1.1/", "package.json"}, termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL, "entry file"},
		{[]string{"rm", "calc.go"}, termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL, "not a plain edit"},
	} {
		p := planIn(t, d, d.Workspace, c.argv...)
		if p.State != c.state || !strings.Contains(strings.Join(p.Decision.Reasons, " "), c.why) {
			t.Errorf("%q under the enforced sandbox: %v %v, want %v saying %q", c.argv, p.State, p.Decision.Reasons, c.state, c.why)
		}
	}
	if _, err := os.Stat(hook); err == nil {
		t.Error("a hook was written")
	}

	// The setting on ask: the same edits ask, and the step names the setting.
	ask := harness.Start(t, harness.Options{Config: "sandbox: required\n", AskWrites: true})
	for _, argv := range edits(ask.Workspace) {
		p := planIn(t, ask, ask.Workspace, argv...)
		st := planStep(p, "sandboxed-workspace-write")
		if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || st == nil || st.Outcome != "ask" || !strings.Contains(st.Detail, "sandboxed_workspace_writes is ask") {
			t.Errorf("%q with sandboxed_workspace_writes: ask: %v step %v, want awaiting approval naming the setting", argv, p.State, st)
		}
	}

	// The sandbox off: they ask as before.
	off := harness.Start(t, harness.Options{Config: "sandbox: off\n"})
	for _, argv := range edits(off.Workspace) {
		p := planIn(t, off, off.Workspace, argv...)
		if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || !strings.Contains(strings.Join(p.Decision.Reasons, " "), "no fully enforced sandbox") {
			t.Errorf("%q with the sandbox off: %v %v, want awaiting approval saying there is no enforced sandbox", argv, p.State, p.Decision.Reasons)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
