package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

const argvSecret = "fx-argv-secret-4b1e9d27c0"

// TestSecretInArgvRunsAsPlanned: a configured secret in a plan's argv is
// redacted in everything shown (plan, events, receipt), yet the command
// that runs is the real one and its plan is not called stale: an allowed
// plan, an approved one, and an approved one executed after a restart (the
// journal replay). It failed when redacting the plan's decision rewrote the
// request it shares its argv with, so every such plan was refused with "the
// canonical request changed".
func TestSecretInArgvRunsAsPlanned(t *testing.T) {
	dir := t.TempDir()
	sec := filepath.Join(dir, "secret")
	if err := os.WriteFile(sec, []byte(argvSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := harness.Start(t, harness.Options{Config: "secrets: [" + sec + "]\n", AskWrites: true})
	noSecret := func(what, s string) {
		t.Helper()
		if strings.Contains(s, argvSecret) {
			t.Errorf("%s shows the secret: %s", what, s)
		}
	}
	cwd := d.Workspace
	newPlan := func(argv ...string) *termdv1.Plan {
		t.Helper()
		resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: argv, Cwd: cwd}})
		if err != nil {
			t.Fatalf("plan %q: %v", argv, err)
		}
		js, _ := protojson.Marshal(resp.Plan)
		noSecret("the plan", string(js))
		return resp.Plan
	}
	approve := func(p *termdv1.Plan) {
		t.Helper()
		if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
			t.Fatalf("plan %v: %s %q, want awaiting approval", p.Decision.Argv, p.State, p.Decision.Reasons)
		}
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(p *termdv1.Plan) (stdout string) {
		t.Helper()
		ex, rec, stdout, stderr := runToEnd(t, d.Client, p)
		noSecret("stdout events", stdout)
		noSecret("stderr events", stderr)
		if ex.GetExitCode() != 0 || rec.GetExitCode() != 0 {
			t.Fatalf("%v exited %d: %s", p.Decision.Argv, rec.GetExitCode(), stderr)
		}
		if rec.RequestHash != p.Decision.RequestHash {
			t.Errorf("the receipt binds request %s; the plan showed %s", rec.RequestHash, p.Decision.RequestHash)
		}
		r, err := d.Client.Receipts.GetReceipt(ctxT(t), &termdv1.GetReceiptRequest{ReceiptId: rec.Id})
		if err != nil {
			t.Fatal(err)
		}
		noSecret("the receipt", r.ReceiptJson)
		if !strings.Contains(r.ReceiptJson, "[REDACTED") {
			t.Errorf("the receipt does not show the secret redacted: %s", r.ReceiptJson)
		}
		return stdout
	}

	// Allowed at once: the output is the secret, redacted.
	p := newPlan("echo", argvSecret)
	if p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("echo: %s %q, want planned", p.State, p.Decision.Reasons)
	}
	if out := run(p); !strings.Contains(out, "[REDACTED") {
		t.Errorf("echo's output is %q, want the secret redacted", out)
	}

	// Approved: the file created has the real name, not the redacted one.
	p = newPlan("touch", argvSecret)
	approve(p)
	run(p)
	if _, err := os.Stat(filepath.Join(d.Workspace, argvSecret)); err != nil {
		t.Errorf("touch did not create the file the plan named: %v", err)
	}
	if ents, _ := os.ReadDir(d.Workspace); len(ents) != 1 {
		t.Errorf("the workspace holds %d entries, want only the secret-named file", len(ents))
	}

	// The secret in the working directory's name: the plan shows it
	// redacted and still runs there.
	cwd = filepath.Join(d.Workspace, "dir-"+argvSecret)
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cwd, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p = newPlan("ls")
	if p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("ls: %s %q, want planned", p.State, p.Decision.Reasons)
	}
	if out := run(p); strings.TrimSpace(out) != "marker" {
		t.Errorf("ls in the secret-named directory printed %q, want marker", out)
	}
	cwd = d.Workspace

	// Approved, then the daemon restarts: the plan comes back from the
	// journal and still runs what was approved.
	second := argvSecret + ".2"
	p = newPlan("touch", second)
	approve(p)
	d.Stop()
	d.Restart()
	run(p)
	if _, err := os.Stat(filepath.Join(d.Workspace, second)); err != nil {
		t.Errorf("after a restart, touch did not create the file the plan named: %v", err)
	}
}
