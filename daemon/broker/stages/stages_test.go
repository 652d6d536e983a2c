package stages

import (
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/receiptstore"
)

// The report keeps the last Window executions: after Window+100 records of
// 1..Window+100 ms the oldest 100 are gone, and p50/p90 are taken over the
// rest, one row per stage, named.
func TestLogReport(t *testing.T) {
	var l Log
	if got := l.Report(); !strings.Contains(got, "over the last 0 executions") || strings.Contains(got, "total") {
		t.Fatalf("empty report:\n%s", got)
	}
	for i := 1; i <= Window+100; i++ {
		var tm Times
		for s := range N {
			tm[s] = time.Duration(i) * time.Millisecond
		}
		l.Record(tm)
	}
	got := l.Report()
	if !strings.Contains(got, "over the last 512 executions (window 512)") {
		t.Fatalf("report header:\n%s", got)
	}
	// Kept: 101..612 ms; p50 is the 256th (index 255) = 356 ms, p90 index 459 = 560 ms.
	for s := range N {
		var row string
		for _, line := range strings.Split(got, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == s.String() {
				row = line
			}
		}
		if f := strings.Fields(row); len(f) != 3 || f[1] != "356ms" || f[2] != "560ms" {
			t.Errorf("stage %s: row %q, want p50 356ms and p90 560ms", s, row)
		}
	}
}

// Write spreads a durable write's times over the four stages from first on.
func TestTimesWrite(t *testing.T) {
	var tm Times
	tm.Write(ReceiptEncode, receiptstore.WriteTimes{Encode: 1, Wait: 2, Apply: 3, Commit: 4})
	if tm[ReceiptEncode] != 1 || tm[ReceiptWait] != 2 || tm[ReceiptApply] != 3 || tm[ReceiptCommit] != 4 || tm[Receipt] != 0 || tm[Total] != 0 {
		t.Fatalf("times %v", tm)
	}
	if Settle.String() != "settle" || IntentCommit.String() != "intent/commit" || N.String() != "stage(20)" {
		t.Fatalf("names: %s %s %s", Settle, IntentCommit, N)
	}
}
