package policy

import (
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
)

// A package fetch gets the registries allow-list and, under a fully
// enforced sandbox, runs without approval in confirm mode; without the
// sandbox, without the list, with another network or for any other
// network program it still asks.
func TestPackageFetchThroughRegistries(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, f.ws+"/package.json", `{"name":"app","version":"1.0.0"}`)
	mustWrite(t, f.ws+"/go.mod", "module example.com/app\n\ngo 1.22\n")
	fetches := [][]string{{"npm", "install"}, {"npm", "ci"}, {"npm", "install", "--ignore-scripts"}, {"go", "mod", "download"}}
	decide := func(argv []string, network string) decision.Decision {
		return f.pol.Decide(decision.Request{Argv: argv, Cwd: f.ws, Mode: verdict.ModeConfirm, Network: network}, f.ctx)
	}
	f.ctx.Sandbox, f.ctx.EgressLists = true, []string{"registries", "corp"}
	for _, argv := range fetches {
		d := decide(argv, "")
		if d.Verdict != verdict.Allow || d.Sandbox.NetworkMode != "egress:registries" || d.Sandbox.Network || !d.Network {
			t.Errorf("%q: %s network %q (host %t), want allow with egress:registries (%v)", argv, d.Verdict, d.Sandbox.NetworkMode, d.Sandbox.Network, d.Reasons)
		}
		if !hasReason(d, "package fetch runs without approval") {
			t.Errorf("%q: the reasons do not say why it runs: %v", argv, d.Reasons)
		}
		for _, other := range []string{"host", "egress:corp"} {
			if d := decide(argv, other); d.Verdict != verdict.Ask || d.Sandbox.NetworkMode != other {
				t.Errorf("%q with network %s: %s %q, want ask", argv, other, d.Verdict, d.Sandbox.NetworkMode)
			}
		}
		if d := decide(argv, "egress:registries"); d.Verdict != verdict.Allow {
			t.Errorf("%q asking for egress:registries itself: %s (%v)", argv, d.Verdict, d.Reasons)
		}
		if d := f.pol.Decide(decision.Request{Argv: argv, Cwd: f.ws, Mode: verdict.ModeInspect}, f.ctx); d.Verdict != verdict.Deny {
			t.Errorf("%q in inspect mode: %s, want deny", argv, d.Verdict)
		}
	}
	// Not package fetches: they ask even with the registries list.
	for _, argv := range [][]string{{"curl", "https://registry.npmjs.org/"}, {"go", "get", "example.com/x"}, {"npm", "exec", "x"}, {"npm", "update"}, {"npm", "install", "leftpad"}, {"npm", "add", "leftpad"}} {
		if d := decide(argv, "egress:registries"); d.Verdict == verdict.Allow {
			t.Errorf("%q with egress:registries: allowed, want ask or deny (%v)", argv, d.Reasons)
		}
	}
	// Without a fully enforced sandbox, or without an egress proxy (no
	// lists), a fetch asks for the host network as before.
	f.ctx.Sandbox = false
	if d := decide([]string{"npm", "install"}, ""); d.Verdict != verdict.Ask {
		t.Errorf("npm install without the sandbox: %s, want ask", d.Verdict)
	}
	f.ctx.Sandbox, f.ctx.EgressLists = true, nil
	if d := decide([]string{"npm", "install"}, ""); d.Verdict != verdict.Ask || d.Sandbox.NetworkMode != "host" {
		t.Errorf("npm install without an egress proxy: %s %q, want ask with host", d.Verdict, d.Sandbox.NetworkMode)
	}
}
