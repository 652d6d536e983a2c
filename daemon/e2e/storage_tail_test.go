package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// With storage.over_budget: tail, a principal past its daily budget still
// runs commands, but each receipt keeps only the end of the output, counted
// in full; the chain stays verifiable and no receipt is lost.
func TestStorageOverBudgetKeepsATail(t *testing.T) {
	d := harness.Start(t, harness.Options{Config: "storage:\n  per_principal_day: 1048576\n  over_budget: tail\n  tail_bytes: 100\n"})
	var big strings.Builder
	for big.Len() < 300<<10 {
		fmt.Fprintf(&big, "line %d of output that fills the receipt\n", big.Len())
	}
	big.WriteString("the last line says where it ended\n")
	if err := os.WriteFile(filepath.Join(d.Workspace, "big.txt"), []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	type stored struct {
		Stdout          string `json:"stdout"`
		StdoutBytes     int64  `json:"stdout_bytes"`
		StdoutTruncated bool   `json:"stdout_truncated"`
		Detail          string `json:"detail"`
	}
	receiptOf := func() stored {
		p := plan(t, d.Client, "", "cat", "big.txt")
		_, rec, _, _ := runToEnd(t, d.Client, p)
		r, err := d.Client.Receipts.GetReceipt(ctxT(t), &termdv1.GetReceiptRequest{ReceiptId: rec.Id})
		if err != nil {
			t.Fatal(err)
		}
		var s stored
		if err := json.Unmarshal([]byte(r.ReceiptJson), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	var r stored
	for i := 0; i < 8; i++ {
		r = receiptOf()
		if len(r.Stdout) <= 100 {
			break
		}
		if len(r.Stdout) != big.Len() {
			t.Fatalf("run %d within the budget kept %d of %d bytes", i, len(r.Stdout), big.Len())
		}
	}
	want := big.String()[big.Len()-100:]
	if r.Stdout != want || r.StdoutBytes != int64(big.Len()) || !r.StdoutTruncated {
		t.Fatalf("over the budget: stdout %q (%d bytes counted, truncated %v); want the last 100 bytes %q of %d", r.Stdout, r.StdoutBytes, r.StdoutTruncated, want, big.Len())
	}
	if !strings.Contains(r.Detail, "storage.per_principal_day") || !strings.Contains(r.Detail, "storage.over_budget: tail") {
		t.Fatalf("the receipt does not say why its output is cut: %q", r.Detail)
	}
	if out, errOut, code := d.Run("termctl", "audit", "verify"); code != 0 {
		t.Fatalf("audit verify: %s%s", out, errOut)
	}
}
