package policy

import (
	"strings"
	"testing"
)

// Project code asks in confirm mode exactly as before unless a fully
// enforced sandbox confines it; then offline project code runs without
// approval, and anything with the network still asks.
func TestSandboxApprovalEconomy(t *testing.T) {
	f := newFixture(t)
	offline := [][]string{
		{"go", "test", "./..."}, {"go", "build", "./..."}, {"go", "vet", "./..."}, {"make"}, {"make", "test"},
		{"npm", "test"}, {"npm", "run", "build"}, {"pytest"},
	}
	// cargo may fetch crates whatever its flags: the policy classifies it as network.
	online := [][]string{{"npm", "install"}, {"go", "get", "example.com/x"}, {"git", "push", "origin", "main"}, {"cargo", "test", "--offline"}}
	for _, argv := range append(append([][]string{}, offline...), online...) {
		f.ctx.Sandbox = false
		d := f.decide(argv, ModeConfirm)
		if d.Verdict == Deny {
			t.Errorf("%q denied: %v", argv, d.Reasons)
			continue
		}
		if d.RunsProjectCode || d.Network {
			if d.Verdict != Ask {
				t.Errorf("%q without the sandbox: %s, want ask (%v)", argv, d.Verdict, d.Reasons)
			}
		}
		if d.Sandbox.Profile == "" {
			t.Errorf("%q has no sandbox profile", argv)
		}
	}
	for _, argv := range offline {
		f.ctx.Sandbox = true
		d := f.decide(argv, ModeConfirm)
		if !d.RunsProjectCode {
			continue // a read-only inspection (go vet) was allowed anyway
		}
		if d.Verdict != Allow || d.Sandbox.Profile != SandboxWorkspaceWrite || d.Sandbox.Network {
			t.Errorf("%q with the sandbox: %s %+v, want allow in workspace-write (%v)", argv, d.Verdict, d.Sandbox, d.Reasons)
		}
		if !strings.Contains(strings.Join(d.Reasons, " "), "sandbox") {
			t.Errorf("%q: the reasons do not say the sandbox let it run: %v", argv, d.Reasons)
		}
		if d2 := f.decide(argv, ModeInspect); d2.Verdict != Deny {
			t.Errorf("%q in inspect mode: %s, want deny (inspect keeps project code out)", argv, d2.Verdict)
		}
	}
	for _, argv := range online {
		f.ctx.Sandbox = true
		if d := f.decide(argv, ModeConfirm); d.Verdict != Ask {
			t.Errorf("%q with the sandbox but the network: %s, want ask", argv, d.Verdict)
		}
	}
}

func TestSandboxProfiles(t *testing.T) {
	f := newFixture(t)
	ro := f.decide([]string{"cat", "README"}, ModeConfirm)
	if ro.Sandbox.Profile != SandboxReadOnly || ro.Sandbox.Network || len(ro.Sandbox.Exec) == 0 {
		t.Errorf("cat: %+v, want read-only, no network, the program executable", ro.Sandbox)
	}
	w := f.decide([]string{"touch", "x"}, ModeConfirm)
	if w.Sandbox.Profile != SandboxWorkspaceWrite || w.Verdict != Ask {
		t.Errorf("touch: %s %+v, want ask in workspace-write", w.Verdict, w.Sandbox)
	}
	f.ctx.Sandbox = true
	if w := f.decide([]string{"touch", "x"}, ModeConfirm); w.Verdict != Ask {
		t.Errorf("touch with the sandbox: %s, want ask (plain writes still ask)", w.Verdict)
	}
	n := f.decide([]string{"curl", "https://example.com"}, ModeConfirm)
	if !n.Sandbox.Network {
		t.Errorf("curl: %+v, want network", n.Sandbox)
	}
	// The profile is part of the canonical request: narrowing it is a
	// different request.
	narrowed := f.pol.Decide(Request{Argv: []string{"touch", "x"}, Cwd: f.ws, Mode: ModeConfirm, Sandbox: SandboxReadOnly}, f.ctx)
	if narrowed.Sandbox.Profile != SandboxReadOnly || narrowed.RequestHash == w.RequestHash {
		t.Errorf("a plan narrowed to read-only: %+v, hash changed=%t", narrowed.Sandbox, narrowed.RequestHash != w.RequestHash)
	}
	bad := f.pol.Decide(Request{Argv: []string{"cat", "README"}, Cwd: f.ws, Sandbox: "everything"}, f.ctx)
	if bad.Verdict != Deny || !strings.Contains(strings.Join(bad.Reasons, " "), "not a profile") {
		t.Errorf("an unknown profile: %s %v, want a clear denial", bad.Verdict, bad.Reasons)
	}
}
