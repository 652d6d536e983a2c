package policy

import (
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
)

// A privileged request (run as real host root) asks in every mode, trusted
// included, is its own request hash, and leaves a deny a deny; the hash of
// an ordinary request is unchanged by the field's existence.
func TestPrivilegedAlwaysAsks(t *testing.T) {
	ws := t.TempDir()
	p := Default()
	ctx := decision.Context{Workspaces: []string{ws}}
	for _, mode := range []verdict.Mode{verdict.ModeConfirm, verdict.ModeTrusted} {
		plain := p.Explain(decision.Request{Argv: []string{"ls"}, Cwd: ws, Mode: mode}, ctx)
		if plain.Verdict != verdict.Allow || strings.Contains(string(plain.Request), "privileged") {
			t.Fatalf("%s: ls is %s; its canonical request %s", mode, plain.Verdict, plain.Request)
		}
		priv := p.Explain(decision.Request{Argv: []string{"ls"}, Cwd: ws, Mode: mode, Privileged: true}, ctx)
		d := priv.Decision
		if d.Verdict != verdict.Ask || !d.Privileged || verdict.RiskRank(d.Risk) < verdict.RiskRank(verdict.RiskHigh) || !strings.Contains(strings.Join(d.Reasons, "\n"), "privileged") {
			t.Fatalf("%s: a privileged ls: %s %s privileged=%v %v", mode, d.Verdict, d.Risk, d.Privileged, d.Reasons)
		}
		if priv.RequestHash == plain.RequestHash || !strings.Contains(string(priv.Request), `"privileged":true`) {
			t.Fatalf("%s: privileged is not part of the canonical request: %s", mode, priv.Request)
		}
	}
	if d := p.Decide(decision.Request{Argv: []string{"sudo", "ls"}, Cwd: ws, Privileged: true}, ctx); d.Verdict != verdict.Deny {
		t.Fatalf("a privileged sudo: %s, want the deny to hold", d.Verdict)
	}
}
