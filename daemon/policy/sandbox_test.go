package policy

import (
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
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
		d := f.decide(argv, verdict.ModeConfirm)
		if d.Verdict == verdict.Deny {
			t.Errorf("%q denied: %v", argv, d.Reasons)
			continue
		}
		if d.RunsProjectCode || d.Network {
			if d.Verdict != verdict.Ask {
				t.Errorf("%q without the sandbox: %s, want ask (%v)", argv, d.Verdict, d.Reasons)
			}
		}
		if d.Sandbox.Profile == "" {
			t.Errorf("%q has no sandbox profile", argv)
		}
	}
	for _, argv := range offline {
		f.ctx.Sandbox = true
		d := f.decide(argv, verdict.ModeConfirm)
		if !d.RunsProjectCode {
			continue // a read-only inspection (go vet) was allowed anyway
		}
		if d.Verdict != verdict.Allow || d.Sandbox.Profile != decision.SandboxWorkspaceWrite || d.Sandbox.Network {
			t.Errorf("%q with the sandbox: %s %+v, want allow in workspace-write (%v)", argv, d.Verdict, d.Sandbox, d.Reasons)
		}
		if !strings.Contains(strings.Join(d.Reasons, " "), "sandbox") {
			t.Errorf("%q: the reasons do not say the sandbox let it run: %v", argv, d.Reasons)
		}
		if d2 := f.decide(argv, verdict.ModeInspect); d2.Verdict != verdict.Deny {
			t.Errorf("%q in inspect mode: %s, want deny (inspect keeps project code out)", argv, d2.Verdict)
		}
	}
	for _, argv := range online {
		f.ctx.Sandbox = true
		if d := f.decide(argv, verdict.ModeConfirm); d.Verdict != verdict.Ask {
			t.Errorf("%q with the sandbox but the network: %s, want ask", argv, d.Verdict)
		}
	}
}

func TestSandboxProfiles(t *testing.T) {
	f := newFixture(t)
	ro := f.decide([]string{"cat", "README"}, verdict.ModeConfirm)
	if ro.Sandbox.Profile != decision.SandboxReadOnly || ro.Sandbox.Network || len(ro.Sandbox.Exec) == 0 {
		t.Errorf("cat: %+v, want read-only, no network, the program executable", ro.Sandbox)
	}
	w := f.decide([]string{"touch", "x"}, verdict.ModeConfirm)
	if w.Sandbox.Profile != decision.SandboxWorkspaceWrite || w.Verdict != verdict.Ask {
		t.Errorf("touch: %s %+v, want ask in workspace-write", w.Verdict, w.Sandbox)
	}
	f.ctx.Sandbox = true
	if w := f.decide([]string{"touch", "x"}, verdict.ModeConfirm); w.Verdict != verdict.Allow || w.Sandbox.Profile != decision.SandboxWorkspaceWrite {
		t.Errorf("touch with the sandbox: %s %+v, want allow in workspace-write (sandboxed_workspace_writes: allow)", w.Verdict, w.Sandbox)
	}
	f.ctx.Sandbox = false
	n := f.decide([]string{"curl", "https://example.com"}, verdict.ModeConfirm)
	if !n.Sandbox.Network {
		t.Errorf("curl: %+v, want network", n.Sandbox)
	}
	// The profile is part of the canonical request: narrowing it is a
	// different request.
	narrowed := f.pol.Decide(decision.Request{Argv: []string{"touch", "x"}, Cwd: f.ws, Mode: verdict.ModeConfirm, Sandbox: decision.SandboxReadOnly}, f.ctx)
	if narrowed.Sandbox.Profile != decision.SandboxReadOnly || narrowed.RequestHash == w.RequestHash {
		t.Errorf("a plan narrowed to read-only: %+v, hash changed=%t", narrowed.Sandbox, narrowed.RequestHash != w.RequestHash)
	}
	bad := f.pol.Decide(decision.Request{Argv: []string{"cat", "README"}, Cwd: f.ws, Sandbox: "everything"}, f.ctx)
	if bad.Verdict != verdict.Deny || !strings.Contains(strings.Join(bad.Reasons, " "), "not a profile") {
		t.Errorf("an unknown profile: %s %v, want a clear denial", bad.Verdict, bad.Reasons)
	}
}

// policyWithWrites is the fixture's policy with sandboxed_workspace_writes set.
func policyWithWrites(t *testing.T, f *fixture, value string) *Policy {
	t.Helper()
	src := strings.Replace(string(defaultYAML), "trusted_path: [/usr/local/bin, /usr/bin, /bin, /usr/local/go/bin]", "trusted_path: ["+f.bin+"]", 1)
	src = strings.Replace(src, "sandboxed_workspace_writes: allow", "sandboxed_workspace_writes: "+value, 1)
	p, err := Parse("writes.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func stepNamed(d decision.Decision, name string) (decision.Step, bool) {
	for _, s := range d.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return decision.Step{}, false
}

// A plain write inside the workspace runs without approval in confirm mode
// when the sandbox is fully enforced and the setting allows it; the decision
// says why. The setting on ask, no sandbox, or anything beyond a plain edit
// asks as before.
func TestSandboxedWorkspaceWrites(t *testing.T) {
	f := newFixture(t)
	plain := [][]string{
		{"sed", "-i", "s/a/b/", "src/main.go"}, {"mkdir", "-p", "docs"}, {"mv", "README.md", "dir/README.md"},
		{"cp", "data.txt", "copy.txt"}, {"touch", "new.txt"}, {"git", "add", "-A"}, {"git", "commit", "-m", "fix"},
	}
	f.ctx.Sandbox, f.ctx.SandboxBy = true, "Landlock"
	for _, argv := range plain {
		d := f.decide(argv, verdict.ModeConfirm)
		st, ok := stepNamed(d, "sandboxed-workspace-write")
		if d.Verdict != verdict.Allow || !ok || st.Outcome != "allow" || st.Detail != "writes confined to "+f.ws+" by Landlock" {
			t.Errorf("%q with the sandbox: %s, step %+v, want allow with the step saying where and by what (%v)", argv, d.Verdict, st, d.Reasons)
		}
		if !hasReason(d, "sandboxed-workspace-write: allowed without approval, writes confined to "+f.ws+" by Landlock") {
			t.Errorf("%q: the reasons do not say why it runs without approval: %v", argv, d.Reasons)
		}
		if d.ReadOnly || d.Sandbox.Profile != decision.SandboxWorkspaceWrite || d.Sandbox.Network {
			t.Errorf("%q: %+v, want a write in workspace-write without network", argv, d.Sandbox)
		}
		if d := f.decide(argv, verdict.ModeInspect); d.Verdict != verdict.Deny {
			t.Errorf("%q in inspect mode: %s, want deny (inspect never writes)", argv, d.Verdict)
		}
		if d := f.decide(argv, verdict.ModeTrusted); d.Verdict != verdict.Allow {
			t.Errorf("%q in trusted mode: %s", argv, d.Verdict)
		}
	}
	// The setting on ask: the same writes ask, and the step says so.
	f.pol = policyWithWrites(t, f, "ask")
	for _, argv := range plain {
		d := f.decide(argv, verdict.ModeConfirm)
		st, _ := stepNamed(d, "sandboxed-workspace-write")
		if d.Verdict != verdict.Ask || st.Outcome != "ask" || !strings.Contains(st.Detail, "sandboxed_workspace_writes is ask") {
			t.Errorf("%q with sandboxed_workspace_writes: ask: %s, step %+v, want ask naming the setting", argv, d.Verdict, st)
		}
	}
	// Without a fully enforced sandbox they ask as before.
	f.pol = policyWithWrites(t, f, "allow")
	f.ctx.Sandbox = false
	for _, argv := range plain {
		if d := f.decide(argv, verdict.ModeConfirm); d.Verdict != verdict.Ask || !hasReason(d, "no fully enforced sandbox") {
			t.Errorf("%q without the sandbox: %s %v, want ask saying there is no enforced sandbox", argv, d.Verdict, d.Reasons)
		}
	}
	// More than a plain edit asks (or is denied) whatever the sandbox.
	f.ctx.Sandbox = true
	mustWrite(t, f.ws+"/package.json", "{}")
	for _, c := range []struct {
		argv    []string
		verdict verdict.Verdict
		why     string
	}{
		{[]string{"sed", "-i", "s/a/b/", "package.json"}, verdict.Ask, "entry file"},
		{[]string{"mv", "data.txt", "Makefile"}, verdict.Ask, "entry file"},
		{[]string{"git", "commit", "--amend", "-m", "x"}, verdict.Ask, "--amend rewrites the last commit"},
		{[]string{"rm", "data.txt"}, verdict.Ask, "rm is not a plain edit"},
		{[]string{"rm", "-r", "dir"}, verdict.Ask, "its risk is high"},
		{[]string{"git", "checkout", "--", "data.txt"}, verdict.Ask, "git checkout is not a plain edit"},
		{[]string{"cp", "-r", "src", "dir"}, verdict.Ask, "writes recursively"},
		{[]string{"curl", "-o", "page.html", "https://example.com"}, verdict.Ask, "network"},
		{[]string{"sed", "-i", "s/a/b/", ".git/hooks/pre-commit"}, verdict.Deny, ".git/hooks"},
		{[]string{"touch", f.out + "/x"}, verdict.Deny, "outside the workspace"},
		{[]string{"git", "push", "origin", "main"}, verdict.Ask, "publishes"},
	} {
		d := f.decide(c.argv, verdict.ModeConfirm)
		if d.Verdict != c.verdict || !hasReason(d, c.why) {
			t.Errorf("%q with the sandbox: %s %v, want %s with a reason containing %q", c.argv, d.Verdict, d.Reasons, c.verdict, c.why)
		}
	}
	// The verdict is part of the request: a plan approved without the
	// sandbox is stale when the sandbox makes it free, and the reverse.
	f.ctx.Sandbox = false
	asked := f.decide(plain[0], verdict.ModeConfirm)
	f.ctx.Sandbox = true
	if free := f.decide(plain[0], verdict.ModeConfirm); free.RequestHash == asked.RequestHash {
		t.Error("the allowed and the asked decision of one write share a request hash")
	}
}

func TestSandboxedWorkspaceWritesSetting(t *testing.T) {
	f := newFixture(t)
	if got := f.pol.SandboxedWorkspaceWrites(); got != "allow" {
		t.Errorf("default policy: sandboxed_workspace_writes %q, want allow", got)
	}
	src := strings.Replace(string(defaultYAML), "sandboxed_workspace_writes: allow", "sandboxed_workspace_writes: sometimes", 1)
	if _, err := Parse("bad.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "sandboxed_workspace_writes must be allow or ask") {
		t.Errorf("an unknown value: %v, want an error naming the key and its values", err)
	}
	// A project policy may turn it to ask, never back to allow.
	proj, err := Parse("proj.yaml", []byte(projectHeader+"network: true\nsandboxed_workspace_writes: ask\n"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.pol.Narrow(proj)
	if err != nil || n.SandboxedWorkspaceWrites() != "ask" {
		t.Fatalf("a project policy narrowing to ask: %v, %v", err, n)
	}
	f.pol, f.ctx.Sandbox = n, true
	if d := f.decide([]string{"touch", "x"}, verdict.ModeConfirm); d.Verdict != verdict.Ask {
		t.Errorf("touch under a project policy that asks: %s", d.Verdict)
	}
	widen, err := Parse("proj.yaml", []byte(projectHeader+"sandboxed_workspace_writes: allow\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policyWithWrites(t, f, "ask").Narrow(widen); err == nil || !strings.Contains(err.Error(), "sandboxed_workspace_writes: allow widens") {
		t.Errorf("a project policy widening to allow: %v, want refused", err)
	}
}
