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

func TestReadOnlyCommandRunsWithReceipt(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	os.WriteFile(filepath.Join(d.Workspace, "hello.txt"), []byte("hi there\n"), 0o644)
	p := plan(t, d.Client, "", "cat", "hello.txt")
	if p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("cat of a workspace file should be allowed; state %v reasons %v", p.State, p.Decision.Reasons)
	}
	ex, rec, out, _ := runToEnd(t, d.Client, p)
	if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED || out != "hi there\n" {
		t.Fatalf("state %v out %q", ex.State, out)
	}
	r := receiptJSON(t, d.Client, rec.Id)
	if r["status"] != "succeeded" || r["stdout"] != "hi there\n" || r["plan_id"] != p.Id || r["request_hash"] != p.Decision.RequestHash {
		t.Fatalf("receipt: %v", r)
	}
}

func TestWriteNeedsApprovalInConfirmMode(t *testing.T) {
	d := harness.Start(t, harness.Options{AskWrites: true})
	p := plan(t, d.Client, "", "touch", "new.txt")
	if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("touch should need approval; got %v %v", p.State, p.Decision.Reasons)
	}
	if _, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id}); err == nil || !strings.Contains(err.Error(), "awaiting approval") {
		t.Fatalf("executing before approval must be refused naming the state; got %v", err)
	}
	if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: "deadbeef"}); err == nil {
		t.Fatal("approval with a wrong request hash must be refused")
	}
	ap, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash})
	if err != nil {
		t.Fatal(err)
	}
	if ap.Plan.Approval.GetApprover().GetName() == "" {
		t.Fatal("approver not recorded")
	}
	ex, rec, _, _ := runToEnd(t, d.Client, ap.Plan)
	if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("state %v: %s", ex.State, ex.Error)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "new.txt")); err != nil {
		t.Fatal("the approved write did not happen")
	}
	r := receiptJSON(t, d.Client, rec.Id)
	if r["approved"] != true || r["approver"] == nil {
		t.Fatalf("receipt should record the approval: %v", r)
	}
	// A plan runs at most once.
	if _, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id}); err == nil || !strings.Contains(err.Error(), "at most once") {
		t.Fatalf("second execution must be refused; got %v", err)
	}
}

func TestBlockedPlanHasReasonsAndReceipt(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	p := plan(t, d.Client, "", "sudo", "ls")
	if p.State != termdv1.PlanState_PLAN_STATE_BLOCKED || len(p.Decision.Reasons) == 0 || p.ReceiptId == "" {
		t.Fatalf("sudo should be blocked with reasons and a receipt: %v", p)
	}
	r := receiptJSON(t, d.Client, p.ReceiptId)
	if r["status"] != "blocked" {
		t.Fatalf("receipt status %v", r["status"])
	}
}

// Everyday git through termd: a changed file shows up in git diff and git
// status (git diff failed with "external diff died" under a forced empty
// diff.external), and git finds no repository above the workspace.
func TestGitDiffAndStatusWork(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
		cmd.Dir = d.Workspace
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(d.Workspace, "notes.txt"), []byte("first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "notes.txt")
	git("commit", "-q", "-m", "first")
	if err := os.WriteFile(filepath.Join(d.Workspace, "notes.txt"), []byte("first\nsecond line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"git", "diff"}, "+second line"},
		{[]string{"git", "diff", "--", "notes.txt"}, "+second line"},
		{[]string{"git", "status", "--short"}, "M notes.txt"},
	} {
		p := plan(t, d.Client, "", tc.argv...)
		ex, _, stdout, stderr := runToEnd(t, d.Client, p)
		if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED || !strings.Contains(stdout, tc.want) {
			t.Errorf("%v: %v, stdout %q stderr %q", tc.argv, ex.State, stdout, stderr)
		}
	}
}

// A relative cwd is relative to the workspace root (what an agent means by
// "src"); where it resolves is still checked.
func TestRelativeCwdIsInTheWorkspace(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	if err := os.Mkdir(filepath.Join(d.Workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"pwd"}, Cwd: "sub"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Plan.State != termdv1.PlanState_PLAN_STATE_PLANNED || !strings.HasSuffix(resp.Plan.Decision.Cwd, "/sub") {
		t.Fatalf("pwd in sub: %v cwd %q reasons %v", resp.Plan.State, resp.Plan.Decision.Cwd, resp.Plan.Decision.Reasons)
	}
	out, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"pwd"}, Cwd: "../.."}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Plan.State != termdv1.PlanState_PLAN_STATE_BLOCKED {
		t.Fatalf("a relative cwd outside the workspace: %v %v", out.Plan.State, out.Plan.Decision.Reasons)
	}
}
