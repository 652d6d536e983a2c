package cli_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestWatchPrintsEventsAndStopsWhenSessionCloses(t *testing.T) {
	d := start(t)
	s := decode[sessionJSON](t, ok(t, d, "sessions", "create", "-o", "json"))
	w := startBackground(t, d, "watch", "--history", s.ID)
	p := plan(t, d, []string{"--session", s.ID}, "echo", "watched output")
	expect(t, d, 0, "execute", p.ID, "--follow")
	eventually(t, "watch to print the receipt", func() bool {
		out, _ := w.output()
		return strings.Contains(out, "receipt_signed")
	})
	ok(t, d, "sessions", "close", s.ID)
	if code := w.wait(t); code != 0 {
		out, errOut := w.output()
		t.Fatalf("watch should stop cleanly when the session closes, exit %d\n%s%s", code, out, errOut)
	}
	out, _ := w.output()
	for _, want := range []string{"plan_created", "execution_started", "watched output", "finished", "receipt_signed", "session_closed"} {
		if !strings.Contains(out, want) {
			t.Errorf("watch output lacks %q:\n%s", want, out)
		}
	}
}

// TestWatchResumesAfterDaemonRestart: the daemon drops every stream when it
// stops; watch must reconnect by itself and go on printing.
func TestWatchResumesAfterDaemonRestart(t *testing.T) {
	d := start(t)
	w := startBackground(t, d, "watch", "--history", "-o", "json")
	p := plan(t, d, nil, "echo", "before restart")
	expect(t, d, 0, "execute", p.ID, "--follow")
	eventually(t, "watch to print the first execution", func() bool {
		out, _ := w.output()
		return strings.Contains(out, p.ID) && strings.Contains(out, `"receipt_signed"`)
	})

	d.Stop()
	d.Restart()

	p2 := plan(t, d, nil, "echo", "after restart")
	expect(t, d, 0, "execute", p2.ID, "--follow")
	eventually(t, "watch to reconnect and print the second execution", func() bool {
		out, _ := w.output()
		return strings.Contains(out, p2.ID) && strings.Count(out, `"receipt_signed"`) >= 2
	})
	_, errOut := w.output()
	if !strings.Contains(errOut, "reconnecting") {
		t.Errorf("watch should say on stderr that it reconnects, got %q", errOut)
	}
	// Every line on stdout is one JSON event, none printed twice.
	out, _ := w.output()
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		ev := decode[struct {
			GlobalSeq int64  `json:"global_seq"`
			Kind      string `json:"kind"`
			SessionID string `json:"session_id"`
			Time      string `json:"time"`
		}](t, line)
		key := fmt.Sprint(ev.Time, ev.Kind, ev.GlobalSeq)
		if seen[key] {
			t.Errorf("event printed twice: %s", line)
		}
		seen[key] = true
	}
}

// TestWatchSessionAcrossRestart: a session outlives a daemon restart, and so
// does watching it: watch reconnects, prints the session's new events and
// stops when it closes.
func TestWatchSessionAcrossRestart(t *testing.T) {
	d := start(t)
	s := decode[sessionJSON](t, ok(t, d, "sessions", "create", "-o", "json"))
	w := startBackground(t, d, "watch", "--history", s.ID)
	expect(t, d, 0, "run", "--session", s.ID, "--", "echo", "first words")
	eventually(t, "watch to print the first run", func() bool {
		out, _ := w.output()
		return strings.Contains(out, "first words") && strings.Contains(out, "receipt_signed")
	})

	d.Stop()
	d.Restart()

	expect(t, d, 0, "run", "--session", s.ID, "--", "echo", "second words")
	eventually(t, "watch to print the run after the restart", func() bool {
		out, _ := w.output()
		return strings.Contains(out, "second words")
	})
	ok(t, d, "sessions", "close", s.ID)
	if code := w.wait(t); code != 0 {
		out, errOut := w.output()
		t.Fatalf("watch should stop cleanly when the session closes, exit %d\n%s%s", code, out, errOut)
	}
}

// A fresh watch starts at now: it prints what happens next, not what termd
// still holds from before (unless --history).
func TestWatchStartsAtNow(t *testing.T) {
	d := start(t)
	old := plan(t, d, nil, "echo", "before watch")
	expect(t, d, 0, "execute", old.ID, "--follow")
	w := startBackground(t, d, "watch", "-o", "json")
	var fresh []string
	eventually(t, "watch to print a command run after it started", func() bool {
		p := plan(t, d, nil, "echo", "after watch")
		expect(t, d, 0, "execute", p.ID, "--follow")
		fresh = append(fresh, p.ID)
		out, _ := w.output()
		return strings.Contains(strings.ToLower(out), "receipt_signed")
	})
	out, _ := w.output()
	if strings.Contains(out, old.ID) || strings.Contains(out, "before watch") {
		t.Fatalf("a fresh watch printed history:\n%s", out)
	}
	if !strings.Contains(out, fresh[len(fresh)-1]) {
		t.Fatalf("watch should print the new command's events:\n%s", out)
	}
	// --history replays what termd holds.
	h := startBackground(t, d, "watch", "--history", "-o", "json")
	eventually(t, "watch --history to print the first command", func() bool {
		out, _ := h.output()
		return strings.Contains(out, old.ID)
	})
}
