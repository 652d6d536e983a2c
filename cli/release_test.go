package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// An operator who took a terminal's input hands it back with
// `termctl attach --release`: the agent that started the program can type
// again. The agent cannot release what the operator holds; the hand-back is
// an event and part of the receipt.
func TestAttachReleaseHandsInputBack(t *testing.T) {
	d := startWithAgent(t)
	agent := func(args ...string) (string, string, int) {
		t.Helper()
		return d.RunAs(harness.Nobody, "termctl", nil, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The agent plans cat on a terminal; root (an operator) approves and
	// starts it when it asks: it runs as the agent, who holds its input.
	_, errOut, _ := agent("run", "--tty", "--detach", "--", "cat")
	planID := ""
	if i := strings.Index(errOut, "plan "); i >= 0 && len(errOut) >= i+5+36 {
		planID = errOut[i+5 : i+5+36]
	}
	if planID == "" {
		t.Fatalf("no plan id from termctl run --tty --detach:\n%s", errOut)
	}
	p, err := d.Client.Plans.GetPlan(ctx, &termdv1.GetPlanRequest{PlanId: planID})
	if err != nil {
		t.Fatal(err)
	}
	execID := p.Plan.ExecutionId
	if p.Plan.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		if _, err := d.Client.Plans.ApprovePlan(ctx, &termdv1.ApprovePlanRequest{PlanId: planID, RequestHash: p.Plan.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
		r, err := d.Client.Executions.Execute(ctx, &termdv1.ExecuteRequest{PlanId: planID})
		if err != nil {
			t.Fatal(err)
		}
		execID = r.Execution.Id
	}
	if execID == "" {
		t.Fatalf("plan %s did not start: %s %v\n%s", planID, p.Plan.State, p.Plan.Decision.Reasons, errOut)
	}
	sendAs := func(who string, line string) (string, int) {
		args := []string{"send", execID, "--line", line, "--wait", "--pattern", line}
		var errOut string
		var code int
		if who == "agent" {
			_, errOut, code = agent(args...)
		} else {
			_, errOut, code = d.Run("termctl", args...)
		}
		return errOut, code
	}
	if errOut, code := sendAs("agent", "first"); code != 0 {
		t.Fatalf("the agent cannot type into its own terminal: exit %d\n%s", code, errOut)
	}
	// An operator reads the screen by the session's id, as pause, resume
	// and cancel take it.
	if out := ok(t, d, "screen", p.Plan.SessionId); !strings.Contains(out, "first") {
		t.Fatalf("termctl screen SESSION_ID: %q; want the screen of the session's running terminal", out)
	}
	if _, err := d.Client.Terminals.TakeInput(ctx, &termdv1.TakeInputRequest{ExecutionId: execID}); err != nil {
		t.Fatal(err)
	}
	if errOut, code := sendAs("agent", "refused"); code == 0 || !strings.Contains(errOut, "held by root") {
		t.Fatalf("the agent typed while the operator held the input: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := agent("attach", "--release", execID); code == 0 || !strings.Contains(errOut, "only its holder or an operator") {
		t.Fatalf("the agent released the operator's hold: exit %d\n%s", code, errOut)
	}
	out := ok(t, d, "attach", "--release", execID)
	if !strings.Contains(out, "nobody holds the input") {
		t.Fatalf("termctl attach --release: %q; want nobody to hold the input", out)
	}
	if errOut, code := sendAs("agent", "again"); code != 0 {
		t.Fatalf("the agent cannot type after the hand-back: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := agent("send", execID, "--key", "ctrl_d"); code != 0 {
		t.Fatalf("ctrl-d: exit %d\n%s", code, errOut)
	}
	var receiptID string
	eventually(t, "the receipt of cat", func() bool {
		g, err := d.Client.Executions.GetExecution(ctx, &termdv1.GetExecutionRequest{ExecutionId: execID})
		receiptID = g.GetExecution().GetReceiptId()
		return err == nil && receiptID != ""
	})
	out = ok(t, d, "receipts", "show", "-o", "json", receiptID)
	if !strings.Contains(out, `"kind": "input_released"`) || !strings.Contains(out, `"text": "to nobody"`) {
		t.Fatalf("the receipt does not record the hand-back:\n%s", out)
	}
}
