package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestTimeoutsFitRealWork: the default policy gives a command 10 minutes
// (a cold-cache build or a test suite outlives 2) and a terminal the
// policy's maximum, so a terminal in use is ended by its idle limit, not
// by the command timeout; a command that runs out of time says how to ask
// for more (timeout_seconds, termctl --timeout) in its receipt, its
// execution and termctl's message.
func TestTimeoutsFitRealWork(t *testing.T) {
	def := harness.Start(t, harness.Options{})
	p := plan(t, def.Client, "", "true")
	if got := p.Decision.GetTimeoutSeconds(); got != 600 {
		t.Fatalf("default command timeout %d s; want 600", got)
	}
	tp := ttyPlan(t, def, "cat")
	if got := tp.Decision.GetTimeoutSeconds(); got != 3600 || tp.Request.GetTty().GetIdleTimeoutSeconds() != 0 {
		t.Fatalf("terminal timeout %d s; want the policy maximum 3600", got)
	}
	def.Stop()

	// A policy whose default is short: a terminal used past it lives on.
	const line = "  default_timeout: 10m"
	pol := string(policy.DefaultYAML())
	if !strings.Contains(pol, line) {
		t.Fatalf("the default policy no longer has %q; update this test", line)
	}
	d := harness.Start(t, harness.Options{Policy: strings.Replace(pol, line, "  default_timeout: 2s", 1)})
	e := ttyStart(t, d, "cat")
	deadline := time.Now().Add(3 * time.Second) // past the 2 s default
	for i := 0; time.Now().Before(deadline); i++ {
		r := send(t, d.Client, e.Id, &termdv1.WaitSpec{Wait: true, TimeoutMs: 20000, Pattern: "line" + string(rune('a'+i%26))},
			&termdv1.TerminalInput{Input: &termdv1.TerminalInput_Line{Line: "line" + string(rune('a'+i%26))}})
		if r.Execution.GetState() != termdv1.ExecutionState_EXECUTION_STATE_RUNNING {
			t.Fatalf("the terminal in use ended at input %d: %s %q", i, r.Execution.GetState(), r.Execution.GetError())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := d.Client.Executions.CancelExecution(ctxT(t), &termdv1.CancelExecutionRequest{ExecutionId: e.Id}); err != nil {
		t.Fatal(err)
	}

	// A command past its time limit: the receipt and the execution say how
	// to ask for more.
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"sleep", "60"}, Cwd: d.Workspace, TimeoutSeconds: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ex, rec, _, _ := runToEnd(t, d.Client, resp.Plan)
	rc := receiptJSON(t, d.Client, rec.Id)
	detail, _ := rc["detail"].(string)
	for _, want := range []string{"time limit of 1s", "timeout_seconds", "termctl run --timeout", "limits.max_timeout of 1h0m0s"} {
		if rc["status"] != "timed_out" || !strings.Contains(detail, want) || !strings.Contains(ex.GetError(), want) {
			t.Fatalf("timed-out receipt %v detail %q, execution error %q; want %q", rc["status"], detail, ex.GetError(), want)
		}
	}
	_, errOut, code := d.Run("termctl", "run", "--timeout", "1s", "--", "sleep", "60")
	if code != 124 || !strings.Contains(errOut, "termctl run --timeout DURATION") {
		t.Fatalf("termctl run past its timeout: exit %d\n%s", code, errOut)
	}
}
