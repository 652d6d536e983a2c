package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The network mode (issue 32): the policy's default is the workspace
// loopback for offline work and host for a network program (asked); a
// contained mode makes a network program offline; host makes anything
// network use; the mode is part of the canonical request; a bad mode or an
// unknown allow-list is refused.
func TestNetworkMode(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "Makefile"), []byte("all:\n\ttrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := Default()
	ctx := Context{Workspaces: []string{ws}, Sandbox: true}
	decide := func(network string, argv ...string) Decision {
		t.Helper()
		return p.Decide(Request{Argv: argv, Cwd: ws, Mode: ModeConfirm, Network: network}, ctx)
	}
	for _, c := range []struct {
		network string
		argv    []string
		mode    string
		verdict Verdict
		uses    bool
	}{
		{"", []string{"ls"}, "workspace-loopback", Allow, false},
		{"", []string{"make"}, "workspace-loopback", Allow, false}, // confined project code, no approval
		{"none", []string{"make"}, "none", Allow, false},
		{"host", []string{"make"}, "host", Ask, true},
		{"host", []string{"ls"}, "host", Ask, true},
		{"", []string{"curl", "https://example.com"}, "host", Ask, true},
		{"workspace-loopback", []string{"curl", "http://127.0.0.1:8000/"}, "workspace-loopback", Ask, false}, // asked by its rule, not for the network
		{"egress:npm", []string{"ls"}, "egress:npm", Ask, true},
	} {
		d := decide(c.network, c.argv...)
		if d.Sandbox.NetworkMode != c.mode || d.Verdict != c.verdict || d.Network != c.uses || d.Sandbox.Network != (c.mode == "host") {
			t.Errorf("%v with network %q: mode %q verdict %s network %v (sandbox host %v), want %q %s %v; %v",
				c.argv, c.network, d.Sandbox.NetworkMode, d.Verdict, d.Network, d.Sandbox.Network, c.mode, c.verdict, c.uses, d.Reasons)
		}
		if why := strings.Join(d.Reasons, "\n"); !c.uses && strings.Contains(why, "uses the network") {
			t.Errorf("%v with network %q asks for the network: %s", c.argv, c.network, why)
		}
	}
	// Part of the canonical request.
	a, b := p.Explain(Request{Argv: []string{"ls"}, Cwd: ws, Network: "none"}, ctx), p.Explain(Request{Argv: []string{"ls"}, Cwd: ws}, ctx)
	if a.RequestHash == b.RequestHash || !strings.Contains(string(a.Request), `"network_mode":"none"`) || !strings.Contains(string(b.Request), `"network_mode":"workspace-loopback"`) {
		t.Errorf("the network mode is not in the canonical request:\n%s\n%s", a.Request, b.Request)
	}
	// Refusals name what was wrong.
	if d := decide("internet", "ls"); d.Verdict != Deny || !strings.Contains(strings.Join(d.Reasons, "\n"), `network "internet" is not a network mode`) {
		t.Errorf("network internet: %s %v", d.Verdict, d.Reasons)
	}
	if d := decide("egress:", "ls"); d.Verdict != Deny {
		t.Errorf("network egress: with no name: %s %v", d.Verdict, d.Reasons)
	}
	ctx.EgressLists = []string{"pypi"}
	if d := decide("egress:npm", "ls"); d.Verdict != Deny || !strings.Contains(strings.Join(d.Reasons, "\n"), "configured: pypi") {
		t.Errorf("an unknown allow-list: %s %v", d.Verdict, d.Reasons)
	}
	if d := decide("egress:pypi", "ls"); d.Verdict == Deny {
		t.Errorf("a configured allow-list: %s %v", d.Verdict, d.Reasons)
	}
}
