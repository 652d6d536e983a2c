package policy

import (
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grant"
	"github.com/termd/termd/daemon/policy/verdict"
)

// A request names credentials; the policy checks them against what the
// daemon says the caller may ask for, and the name (never a value) is part
// of the canonical request.
func TestCredentialsAreDecidedByName(t *testing.T) {
	f := newFixture(t)
	f.ctx.Credentials = map[string]verdict.CredentialScope{
		"GH_TOKEN": {Programs: []string{"git"}},
		"ANY_KEY":  {},
	}
	dec := func(argv []string, mode verdict.Mode, creds ...string) decision.Decision {
		return f.pol.Decide(decision.Request{Argv: argv, Cwd: f.ws, Mode: mode, Credentials: creds}, f.ctx)
	}
	plain := dec([]string{"git", "status"}, verdict.ModeConfirm)
	if plain.Verdict != verdict.Allow {
		t.Fatalf("git status: %s %v", plain.Verdict, plain.Reasons)
	}
	withTok := dec([]string{"git", "status"}, verdict.ModeConfirm, "GH_TOKEN")
	if withTok.Verdict != verdict.Ask || !hasReason(withTok, "receives the credentials GH_TOKEN") {
		t.Fatalf("git status with GH_TOKEN in confirm mode: %s %v", withTok.Verdict, withTok.Reasons)
	}
	if withTok.RequestHash == plain.RequestHash || len(withTok.Credentials) != 1 {
		t.Fatal("the credential names must be part of the canonical request")
	}
	if again := dec([]string{"git", "status"}, verdict.ModeConfirm, "GH_TOKEN", "GH_TOKEN"); again.RequestHash != withTok.RequestHash {
		t.Fatal("a name given twice is one credential")
	}
	if d := dec([]string{"git", "status"}, verdict.ModeTrusted, "GH_TOKEN"); d.Verdict != verdict.Allow {
		t.Fatalf("trusted mode: %s %v", d.Verdict, d.Reasons)
	}
	if d := dec([]string{"git", "status"}, verdict.ModeInspect, "GH_TOKEN"); d.Verdict != verdict.Deny || !hasReason(d, "inspect mode never receives credentials") {
		t.Fatalf("inspect mode: %s %v", d.Verdict, d.Reasons)
	}
	if d := dec([]string{"curl", "https://example.com"}, verdict.ModeConfirm, "GH_TOKEN"); d.Verdict != verdict.Deny || !hasReason(d, "credential GH_TOKEN is available only to git; this plan runs curl") {
		t.Fatalf("curl with a git credential: %s %v", d.Verdict, d.Reasons)
	}
	// A path the request names is not "git" found through the trusted PATH.
	if d := dec([]string{f.bin + "/git", "status"}, verdict.ModeConfirm, "GH_TOKEN"); d.Verdict != verdict.Deny {
		t.Fatalf("git by path: %s %v", d.Verdict, d.Reasons)
	}
	unknown := dec([]string{"git", "status"}, verdict.ModeConfirm, "OTHER_TOKEN")
	if unknown.Verdict != verdict.Deny || !hasReason(unknown, "credential OTHER_TOKEN is not defined for you") {
		t.Fatalf("unknown credential: %s %v", unknown.Verdict, unknown.Reasons)
	}
	if d := dec([]string{"ls"}, verdict.ModeConfirm, "ANY_KEY"); d.Verdict != verdict.Ask {
		t.Fatalf("an unscoped credential: %s %v", d.Verdict, d.Reasons)
	}
	if d := f.pol.Decide(decision.Request{Argv: []string{"ls"}, Cwd: f.ws, Mode: verdict.ModeConfirm, Env: map[string]string{"ANY_KEY": "x"}, Credentials: []string{"ANY_KEY"}}, f.ctx); d.Verdict != verdict.Deny || !hasReason(d, "drop one") {
		t.Fatalf("env and credential of one name: %s %v", d.Verdict, d.Reasons)
	}
	// A grant names the credentials it covers.
	b := grant.BindingOf(withTok)
	if why := b.Uncovered(withTok); why != "" {
		t.Fatalf("the grant does not cover its own decision: %s", why)
	}
	f.ctx.Credentials["NPM_TOKEN"] = verdict.CredentialScope{}
	both := dec([]string{"git", "status"}, verdict.ModeConfirm, "GH_TOKEN", "NPM_TOKEN")
	if why := b.Uncovered(both); why == "" {
		t.Fatal("a grant for GH_TOKEN covered a plan receiving NPM_TOKEN too")
	}
	if why := grant.BindingOf(dec([]string{"git", "status"}, verdict.ModeConfirm)).Uncovered(withTok); why == "" {
		t.Fatal("a grant without credentials covered a plan receiving one")
	}
}
