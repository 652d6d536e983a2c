package cli_test

import (
	"strings"
	"testing"
)

// TestHelpAndCompletion: the help a newcomer reads and shell completion
// work without a daemon.
func TestHelpAndCompletion(t *testing.T) {
	d := start(t)
	out := ok(t, d, "--help")
	for _, want := range []string{"Exit codes:", "124", "125", "130", "plan", "approve", "execute", "run", "receipts"} {
		if !strings.Contains(out, want) {
			t.Errorf("termctl --help lacks %q", want)
		}
	}
	for _, verb := range [][]string{
		{"plan"}, {"approve"}, {"deny"}, {"pending"}, {"execute"}, {"run"}, {"sessions"}, {"watch"},
		{"pause"}, {"resume"}, {"cancel"}, {"replan"}, {"output"}, {"policy", "check"}, {"policy", "show"},
		{"policy", "lint"}, {"policy", "reload"}, {"receipts", "list"}, {"receipts", "show"},
		{"receipts", "export"}, {"receipts", "public-key"}, {"receipts", "verify"}, {"receipt", "verify"}, {"audit", "verify"}, {"ask"},
	} {
		out := ok(t, d, append(verb, "--help")...)
		if !strings.Contains(out, "Usage:") || len(out) < 200 {
			t.Errorf("termctl %s --help is too thin:\n%s", strings.Join(verb, " "), out)
		}
	}
	// A wrong subcommand is a usage error with a suggestion, not help + exit 0.
	if _, errOut := expect(t, d, 2, "receipt", "list"); !strings.Contains(errOut, "did you mean `termctl receipts list`") {
		t.Errorf("receipt list: %q", errOut)
	}
	// One noun: receipts; the old `receipt verify` is a hidden alias.
	if out := ok(t, d, "--help"); strings.Contains(out, "\n  receipt ") {
		t.Errorf("the old spelling `receipt` should be hidden from --help:\n%s", out)
	}
	if out := ok(t, d, "receipts"); !strings.Contains(out, "Available Commands") {
		t.Errorf("bare `termctl receipts` should print its help:\n%s", out)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if out := ok(t, d, "completion", sh); !strings.Contains(out, "termctl") {
			t.Errorf("completion %s printed no script", sh)
		}
	}
	_, errOut := expect(t, d, 2, "-o", "xml", "status")
	if !strings.Contains(errOut, "table, json or yaml") {
		t.Errorf("a bad -o should say the choices, got %q", errOut)
	}
}
