package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func writeProjectPolicy(t *testing.T, d *harness.Daemon, body string) {
	t.Helper()
	dir := filepath.Join(d.Workspace, ".termd")
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Policy.ReloadPolicy(ctxT(t), &termdv1.ReloadPolicyRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestProjectPolicyOnlyNarrows(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	if p := plan(t, d.Client, "", "rm", "notes.txt"); p.Decision.Verdict == termdv1.Verdict_VERDICT_DENY {
		t.Fatalf("rm of a workspace file should not be denied by the system policy: %v", p.Decision.Reasons)
	}
	writeProjectPolicy(t, d, "version: 1\nkind: project\nname: no-rm\nrules:\n  - {id: project.no-rm, program: rm, decision: deny, risk: high, reason: \"this project forbids rm\"}\n")
	p := plan(t, d.Client, "", "rm", "notes.txt")
	if p.State != termdv1.PlanState_PLAN_STATE_BLOCKED || !strings.Contains(strings.Join(p.Decision.Reasons, "; "), "this project forbids rm") {
		t.Fatalf("the project policy should deny rm: %v %v", p.State, p.Decision.Reasons)
	}
	if p := plan(t, d.Client, "", "ls"); p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("ls should still run: %v %v", p.State, p.Decision.Reasons)
	}
	// The project policy itself cannot be changed by a command.
	if p := plan(t, d.Client, "", "rm", ".termd/policy.yaml"); p.State != termdv1.PlanState_PLAN_STATE_BLOCKED {
		t.Fatalf("removing the project policy must be denied: %v", p.State)
	}
	// A widening project policy is refused, and the workspace fails closed.
	writeProjectPolicy(t, d, "version: 1\nkind: project\nname: wide\nrules:\n  - {id: project.sh, program: sh, decision: allow, risk: low, reason: \"let me\"}\n")
	p = plan(t, d.Client, "", "ls")
	if p.State != termdv1.PlanState_PLAN_STATE_BLOCKED || !strings.Contains(strings.Join(p.Decision.Reasons, "; "), "project policy") {
		t.Fatalf("with a widening project policy nothing should run: %v %v", p.State, p.Decision.Reasons)
	}
	os.Remove(filepath.Join(d.Workspace, ".termd", "policy.yaml"))
	d.Client.Policy.ReloadPolicy(ctxT(t), &termdv1.ReloadPolicyRequest{})
	if p := plan(t, d.Client, "", "ls"); p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("without a project policy, the system policy applies again: %v", p.State)
	}
}
