package e2e

import (
	"sync"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Issue 35: the receipt store says how many durable writes it committed and
// in how many transactions (one fsync each), so an operator can see group
// commit at work: every receipt is counted once, and writes that arrive
// together share a transaction, never the other way round.
func TestReceiptStoreWriteMetrics(t *testing.T) {
	addr := freeAddr(t)
	d := harness.Start(t, harness.Options{Config: "metrics_listen: " + addr + "\n"})
	s, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	w0, c0 := metric(t, addr, "termd_receipt_store_writes"), metric(t, addr, "termd_receipt_store_commits")
	if c0 > w0 {
		t.Fatalf("at start: %.0f commits for %.0f writes", c0, w0)
	}
	// Blocked plans each end in one receipt, and nothing else is written.
	const n = 12
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if p, err := tryPlan(t, d.Client, s.Session.Id, "sudo", "ls"); err != nil || p.GetState() != termdv1.PlanState_PLAN_STATE_BLOCKED {
				t.Errorf("sudo ls: %v %v; want a blocked plan", p.GetState(), err)
			}
		})
	}
	wg.Wait()
	w1, c1 := metric(t, addr, "termd_receipt_store_writes"), metric(t, addr, "termd_receipt_store_commits")
	if w1-w0 != n {
		t.Fatalf("%d blocked plans wrote %.0f times; want one receipt each", n, w1-w0)
	}
	if c1-c0 < 1 || c1-c0 > w1-w0 {
		t.Fatalf("%.0f writes in %.0f commits", w1-w0, c1-c0)
	}
	t.Logf("%.0f receipts in %.0f commits", w1-w0, c1-c0)
	// An execution writes its intent before the command and its receipt after.
	runToEnd(t, d.Client, plan(t, d.Client, s.Session.Id, "true"))
	if w2 := metric(t, addr, "termd_receipt_store_writes"); w2-w1 < 2 {
		t.Fatalf("an execution wrote %.0f times; want its intent and its receipt", w2-w1)
	}
}
