package cli_test

import (
	"strings"
	"testing"
)

func TestPauseResumeCancel(t *testing.T) {
	d := start(t)
	p := plan(t, d, nil, "sleep", "30")
	ex := decode[struct {
		ID string `json:"id"`
	}](t, ok(t, d, "execute", p.ID, "-o", "json"))

	out := ok(t, d, "pause", ex.ID)
	if !strings.Contains(out, "paused execution "+ex.ID) {
		t.Fatalf("pause should confirm, got %q", out)
	}
	out = ok(t, d, "resume", ex.ID)
	if !strings.Contains(out, "resumed execution "+ex.ID) {
		t.Fatalf("resume should confirm, got %q", out)
	}
	// A session id stands for its running execution.
	out = ok(t, d, "cancel", p.SessionID)
	if !strings.Contains(out, ex.ID) {
		t.Fatalf("cancel SESSION should cancel the session's execution %s, got %q", ex.ID, out)
	}
	eventually(t, "the cancelled receipt", func() bool {
		out, _, _ := d.Run("termctl", "receipts", "list", "--session", p.SessionID, "-o", "json")
		return strings.Contains(out, `"cancelled"`)
	})
	_, errOut := expect(t, d, 1, "cancel", "no-such-thing")
	if !strings.Contains(errOut, "no execution or session") {
		t.Fatalf("want a clear not-found, got %q", errOut)
	}
}
