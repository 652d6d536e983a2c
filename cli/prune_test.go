package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// An operator prunes old receipts; the chain still verifies from the
// signed checkpoint, across a restart and new receipts; an agent may not
// prune.
func TestReceiptsPrune(t *testing.T) {
	d := startWithAgent(t)
	for _, w := range []string{"one", "two", "three"} {
		p := plan(t, d, nil, "echo", w)
		expect(t, d, 0, "execute", p.ID, "--follow")
	}
	time.Sleep(20 * time.Millisecond)
	cut := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(20 * time.Millisecond)
	p := plan(t, d, nil, "echo", "kept")
	expect(t, d, 0, "execute", p.ID, "--follow")

	_, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "receipts", "prune", "--before", cut)
	if code == 0 || !strings.Contains(errOut, "operator") {
		t.Fatalf("an agent pruned receipts (exit %d): %s", code, errOut)
	}
	if _, errOut := expect(t, d, 2, "receipts", "prune"); !strings.Contains(errOut, "--before DATE is required") {
		t.Fatalf("prune without --before: %s", errOut)
	}

	out := ok(t, d, "receipts", "prune", "--before", cut)
	if !strings.Contains(out, "3 receipts (seq 1–3)") || !strings.Contains(out, "checkpoint:") {
		t.Fatalf("prune output:\n%s", out)
	}
	if out := ok(t, d, "receipts", "list"); strings.Contains(out, "echo one") || !strings.Contains(out, "echo kept") {
		t.Fatalf("after prune, list:\n%s", out)
	}
	if out := ok(t, d, "audit", "verify"); !strings.Contains(out, "1 receipts checked from a signed checkpoint of seq 1–3") {
		t.Fatalf("audit verify after prune:\n%s", out)
	}
	if out := ok(t, d, "receipts", "prune", "--before", cut); !strings.Contains(out, "nothing to prune") {
		t.Fatalf("second prune:\n%s", out)
	}

	d.Stop()
	d.Restart()
	p = plan(t, d, nil, "echo", "after restart")
	expect(t, d, 0, "execute", p.ID, "--follow")
	out = ok(t, d, "audit", "verify")
	if !strings.Contains(out, "2 receipts checked from a signed checkpoint") || !strings.Contains(out, "head: 5:") {
		t.Fatalf("audit verify after a restart and a new receipt:\n%s", out)
	}
}
