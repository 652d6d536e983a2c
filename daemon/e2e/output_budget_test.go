package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// budgetPolicy is the default policy with a small output budget, so the
// test ends in seconds instead of writing 64 MiB.
func budgetPolicy(t *testing.T, budget string) string {
	t.Helper()
	p := string(policy.DefaultYAML())
	const line = "output_budget: 67108864"
	if !strings.Contains(p, line) {
		t.Fatalf("the default policy should set %q", line)
	}
	return strings.Replace(p, line, "output_budget: "+budget, 1)
}

// `yes` ends at the output budget in its own final state with a receipt,
// and its live output costs a bounded number of events per second and per byte.
func TestYesEndsAtOutputBudget(t *testing.T) {
	const budget = 8 << 20
	d := harness.Start(t, harness.Options{Policy: budgetPolicy(t, "8388608")})
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"yes"}, TimeoutSeconds: 60}})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	st, err := d.Client.Executions.ExecuteAndWait(ctxT(t), &termdv1.ExecuteAndWaitRequest{PlanId: resp.Plan.Id})
	if err != nil {
		t.Fatal(err)
	}
	var (
		outputEvents int
		liveBytes    int
		final        *termdv1.Execution
		rec          *termdv1.ReceiptSummary
	)
	for rec == nil {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream ended before the receipt: %v", err)
		}
		switch ev := m.Event; ev.Kind {
		case termdv1.EventKind_EVENT_KIND_OUTPUT:
			outputEvents++
			liveBytes += len(ev.GetOutput().Data)
		case termdv1.EventKind_EVENT_KIND_FINISHED:
			final = ev.GetExecution()
		case termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED:
			rec = ev.GetReceipt()
		}
	}
	took := time.Since(began)
	if final.GetState() != termdv1.ExecutionState_EXECUTION_STATE_OUTPUT_LIMIT {
		t.Fatalf("yes should end in state output_limit, got %v after %s (%d bytes)", final.GetState(), took, final.GetStdoutBytes())
	}
	if !strings.Contains(final.GetError(), "output budget") {
		t.Fatalf("the execution should say why it ended, got %q", final.GetError())
	}
	r := receiptJSON(t, d.Client, rec.Id)
	if r["status"] != "output_limit" || !strings.Contains(r["detail"].(string), "limits.output_budget") {
		t.Fatalf("the receipt should record output_limit and name the limit: status %v detail %v", r["status"], r["detail"])
	}
	if liveBytes > budget {
		t.Fatalf("live output should stop at the budget (%d bytes), viewers got %d", budget, liveBytes)
	}
	// One stream: at most one partial event per 50 ms slot plus the last
	// one, and full events (512 KiB) that go out at once.
	if limit := int(took/(50*time.Millisecond)) + 2 + liveBytes/(512<<10); outputEvents > limit {
		t.Fatalf("%d output events in %s for %d bytes; coalescing allows at most %d", outputEvents, took, liveBytes, limit)
	}
	t.Logf("yes: %d bytes written, %d live in %d events over %s", final.GetStdoutBytes(), liveBytes, outputEvents, took.Round(time.Millisecond))
}
