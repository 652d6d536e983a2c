package policy

import (
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
)

// TestTerminalDecisions: a terminal changes what typed input can do, so a
// REPL asks (its input is code), interactive-safe programs run as they
// would, shells stay denied, and interactive options need the terminal.
func TestTerminalDecisions(t *testing.T) {
	f := newFixture(t)
	tty := &decision.Terminal{Rows: 30, Cols: 100}
	cases := []struct {
		argv   []string
		tty    *decision.Terminal
		mode   verdict.Mode
		want   verdict.Verdict
		reason string
	}{
		{[]string{"python3"}, tty, verdict.ModeConfirm, verdict.Ask, "typed input is code"},
		{[]string{"python3", "-q"}, tty, verdict.ModeConfirm, verdict.Ask, "typed input is code"},
		{[]string{"python3"}, nil, verdict.ModeConfirm, verdict.Deny, "interpreter escape"},
		{[]string{"python3", "-c", "print(1)"}, tty, verdict.ModeConfirm, verdict.Deny, "inline code"},
		{[]string{"python3"}, tty, verdict.ModeInspect, verdict.Deny, "inspect mode"},
		{[]string{"less", "data.txt"}, tty, verdict.ModeConfirm, verdict.Allow, ""},
		{[]string{"top"}, tty, verdict.ModeConfirm, verdict.Allow, ""},
		{[]string{"bash"}, tty, verdict.ModeConfirm, verdict.Deny, "shell escape"},
		{[]string{"bash"}, tty, verdict.ModeTrusted, verdict.Deny, "shell escape"},
		{[]string{"git", "add", "-p"}, tty, verdict.ModeTrusted, verdict.Allow, ""},
		// As git add . without a terminal: confirm mode asks for writes.
		{[]string{"git", "add", "-p"}, tty, verdict.ModeConfirm, verdict.Ask, "the command writes"},
		{[]string{"git", "add", "-p"}, nil, verdict.ModeTrusted, verdict.Deny, "is interactive"},
		{[]string{"git", "add", "-e"}, tty, verdict.ModeTrusted, verdict.Deny, "opens an editor"},
		{[]string{"cat", "data.txt"}, tty, verdict.ModeConfirm, verdict.Ask, "not marked interactive-safe"},
		{[]string{"cat", "data.txt"}, nil, verdict.ModeConfirm, verdict.Allow, ""},
	}
	for _, c := range cases {
		d := f.pol.Decide(decision.Request{Argv: c.argv, Cwd: f.ws, Mode: c.mode, TTY: c.tty}, f.ctx)
		if d.Verdict != c.want || (c.reason != "" && !hasReason(d, c.reason)) {
			t.Errorf("%q tty=%v %s: %s %q, want %s with %q", c.argv, c.tty != nil, c.mode, d.Verdict, d.Reasons, c.want, c.reason)
		}
	}
	d := f.pol.Decide(decision.Request{Argv: []string{"less", "data.txt"}, Cwd: f.ws, TTY: &decision.Terminal{}}, f.ctx)
	if d.TTY == nil || d.TTY.Rows != DefaultTerminalRows || d.TTY.Cols != DefaultTerminalCols || d.TTY.Idle <= 0 {
		t.Fatalf("terminal not defaulted: %+v", d.TTY)
	}
	if d.ExecEnv["LESSSECURE"] != "1" {
		t.Fatalf("less runs without LESSSECURE: %v", d.ExecEnv)
	}
	plain := f.pol.Decide(decision.Request{Argv: []string{"less", "data.txt"}, Cwd: f.ws}, f.ctx)
	other := f.pol.Decide(decision.Request{Argv: []string{"less", "data.txt"}, Cwd: f.ws, TTY: &decision.Terminal{Rows: 50}}, f.ctx)
	if plain.RequestHash == d.RequestHash || other.RequestHash == d.RequestHash {
		t.Fatal("the terminal is not part of the request hash")
	}
	big := f.pol.Decide(decision.Request{Argv: []string{"less", "data.txt"}, Cwd: f.ws, TTY: &decision.Terminal{Rows: 5000}}, f.ctx)
	if big.Verdict != verdict.Deny || !strings.Contains(strings.Join(big.Reasons, ";"), "too large") {
		t.Fatalf("a huge terminal: %s %q", big.Verdict, big.Reasons)
	}
}
