package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func plan(t *testing.T, c *client.Client, session string, argv ...string) *termdv1.Plan {
	t.Helper()
	resp, err := c.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: session, Request: &termdv1.CommandRequest{Argv: argv}})
	if err != nil {
		t.Fatalf("plan %q: %v", argv, err)
	}
	return resp.Plan
}

// runToEnd executes a plan and collects its events until the receipt.
func runToEnd(t *testing.T, c *client.Client, p *termdv1.Plan) (exec *termdv1.Execution, rec *termdv1.ReceiptSummary, stdout, stderr string) {
	t.Helper()
	return runToEndWithin(t, c, p, 60*time.Second)
}

// runToEndWithin is runToEnd for commands that take long (builds on a
// loaded machine).
func runToEndWithin(t *testing.T, c *client.Client, p *termdv1.Plan, limit time.Duration) (exec *termdv1.Execution, rec *termdv1.ReceiptSummary, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	st, err := c.Executions.ExecuteAndWait(ctx, &termdv1.ExecuteAndWaitRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			if rec == nil {
				t.Fatalf("stream ended before the receipt: %v", err)
			}
			return
		}
		ev := m.Event
		switch ev.Kind {
		case termdv1.EventKind_EVENT_KIND_OUTPUT:
			if ev.GetOutput().Stream == termdv1.OutputStream_OUTPUT_STREAM_STDERR {
				stderr += string(ev.GetOutput().Data)
			} else {
				stdout += string(ev.GetOutput().Data)
			}
		case termdv1.EventKind_EVENT_KIND_FINISHED:
			exec = ev.GetExecution()
		case termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED:
			rec = ev.GetReceipt()
		}
	}
}

func receiptJSON(t *testing.T, c *client.Client, id string) map[string]any {
	t.Helper()
	r, err := c.Receipts.GetReceipt(ctxT(t), &termdv1.GetReceiptRequest{ReceiptId: id})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.ReceiptJson), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// agent dials the daemon as uid 65534 is not possible in-process; agent
// behaviour is exercised through termctl run as that uid (see RunAs).
var _ = harness.Nobody
