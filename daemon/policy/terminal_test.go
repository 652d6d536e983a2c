package policy

import (
	"strings"
	"testing"
)

// TestTerminalDecisions: a terminal changes what typed input can do, so a
// REPL asks (its input is code), interactive-safe programs run as they
// would, shells stay denied, and interactive options need the terminal.
func TestTerminalDecisions(t *testing.T) {
	f := newFixture(t)
	tty := &Terminal{Rows: 30, Cols: 100}
	cases := []struct {
		argv   []string
		tty    *Terminal
		mode   Mode
		want   Verdict
		reason string
	}{
		{[]string{"python3"}, tty, ModeConfirm, Ask, "typed input is code"},
		{[]string{"python3", "-q"}, tty, ModeConfirm, Ask, "typed input is code"},
		{[]string{"python3"}, nil, ModeConfirm, Deny, "interpreter escape"},
		{[]string{"python3", "-c", "print(1)"}, tty, ModeConfirm, Deny, "inline code"},
		{[]string{"python3"}, tty, ModeInspect, Deny, "inspect mode"},
		{[]string{"less", "data.txt"}, tty, ModeConfirm, Allow, ""},
		{[]string{"top"}, tty, ModeConfirm, Allow, ""},
		{[]string{"bash"}, tty, ModeConfirm, Deny, "shell escape"},
		{[]string{"bash"}, tty, ModeTrusted, Deny, "shell escape"},
		{[]string{"git", "add", "-p"}, tty, ModeTrusted, Allow, ""},
		// As git add . without a terminal: confirm mode asks for writes.
		{[]string{"git", "add", "-p"}, tty, ModeConfirm, Ask, "the command writes"},
		{[]string{"git", "add", "-p"}, nil, ModeTrusted, Deny, "is interactive"},
		{[]string{"git", "add", "-e"}, tty, ModeTrusted, Deny, "opens an editor"},
		{[]string{"cat", "data.txt"}, tty, ModeConfirm, Ask, "not marked interactive-safe"},
		{[]string{"cat", "data.txt"}, nil, ModeConfirm, Allow, ""},
	}
	for _, c := range cases {
		d := f.pol.Decide(Request{Argv: c.argv, Cwd: f.ws, Mode: c.mode, TTY: c.tty}, f.ctx)
		if d.Verdict != c.want || (c.reason != "" && !hasReason(d, c.reason)) {
			t.Errorf("%q tty=%v %s: %s %q, want %s with %q", c.argv, c.tty != nil, c.mode, d.Verdict, d.Reasons, c.want, c.reason)
		}
	}
	d := f.pol.Decide(Request{Argv: []string{"less", "data.txt"}, Cwd: f.ws, TTY: &Terminal{}}, f.ctx)
	if d.TTY == nil || d.TTY.Rows != DefaultTerminalRows || d.TTY.Cols != DefaultTerminalCols || d.TTY.Idle <= 0 {
		t.Fatalf("terminal not defaulted: %+v", d.TTY)
	}
	if d.ExecEnv["LESSSECURE"] != "1" {
		t.Fatalf("less runs without LESSSECURE: %v", d.ExecEnv)
	}
	plain := f.pol.Decide(Request{Argv: []string{"less", "data.txt"}, Cwd: f.ws}, f.ctx)
	other := f.pol.Decide(Request{Argv: []string{"less", "data.txt"}, Cwd: f.ws, TTY: &Terminal{Rows: 50}}, f.ctx)
	if plain.RequestHash == d.RequestHash || other.RequestHash == d.RequestHash {
		t.Fatal("the terminal is not part of the request hash")
	}
	big := f.pol.Decide(Request{Argv: []string{"less", "data.txt"}, Cwd: f.ws, TTY: &Terminal{Rows: 5000}}, f.ctx)
	if big.Verdict != Deny || !strings.Contains(strings.Join(big.Reasons, ";"), "too large") {
		t.Fatalf("a huge terminal: %s %q", big.Verdict, big.Reasons)
	}
}
