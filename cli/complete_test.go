package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// complete asks termctl's completion for the words after `termctl`.
func complete(t *testing.T, d interface {
	Run(string, ...string) (string, string, int)
}, words ...string) string {
	t.Helper()
	out, errOut, code := d.Run("termctl", append([]string{"__complete"}, words...)...)
	if code != 0 {
		t.Fatalf("termctl __complete %v: exit %d\n%s%s", words, code, out, errOut)
	}
	return out
}

func TestCompletionOffersLiveIDs(t *testing.T) {
	d := start(t)
	waiting := plan(t, d, []string{"--mode", "confirm"}, "touch", "later.txt")
	runnable := plan(t, d, nil, "echo", "hi")
	out, _ := expect(t, d, 0, "run", "-o", "json", "--", "echo", "done")
	var res struct {
		ReceiptID string `json:"receipt_id"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.ReceiptID == "" {
		t.Fatalf("run -o json: %v %q", err, out)
	}

	approve := complete(t, d, "approve", "")
	if !strings.Contains(approve, waiting.ID+"\tawaiting_approval: touch later.txt") || strings.Contains(approve, runnable.ID) {
		t.Fatalf("approve should complete the plan awaiting approval (with its command) and not the allowed one:\n%s", approve)
	}
	if exec := complete(t, d, "execute", ""); !strings.Contains(exec, runnable.ID) || strings.Contains(exec, waiting.ID) {
		t.Fatalf("execute should complete the runnable plan only:\n%s", exec)
	}
	if prefix := complete(t, d, "approve", waiting.ID[:4]); !strings.Contains(prefix, waiting.ID) {
		t.Fatalf("a typed prefix should still complete:\n%s", prefix)
	}
	if rc := complete(t, d, "receipts", "show", ""); !strings.Contains(rc, res.ReceiptID+"\t") || !strings.Contains(rc, "echo done") {
		t.Fatalf("receipts show should complete receipt ids with their command:\n%s", rc)
	}
	if ss := complete(t, d, "sessions", "close", ""); !strings.Contains(ss, "termctl") {
		t.Fatalf("sessions close should complete termctl's session:\n%s", ss)
	}
	if o := complete(t, d, "status", "-o", ""); !strings.Contains(o, "json\n") || !strings.Contains(o, "yaml\n") {
		t.Fatalf("-o should complete its values:\n%s", o)
	}
	if m := complete(t, d, "plan", "--mode", ""); !strings.Contains(m, "confirm\n") {
		t.Fatalf("--mode should complete its values:\n%s", m)
	}
	// No termd: nothing offered, no file names, no error.
	if none := complete(t, d, "--socket", filepath.Join(t.TempDir(), "gone.sock"), "approve", ""); strings.Contains(none, waiting.ID) || !strings.Contains(none, ":4") {
		t.Fatalf("without termd completion should offer nothing (no files):\n%s", none)
	}
}
