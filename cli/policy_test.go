package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/harness"
)

// checkResult is the documented JSON of `termctl policy check -o json`.
type checkResult struct {
	Decision     string   `json:"decision"`
	Risk         string   `json:"risk"`
	Reasons      []string `json:"reasons"`
	Rules        []string `json:"rules"`
	RequestHash  string   `json:"request_hash"`
	ResolvedPath string   `json:"resolved_path"`
}

func TestPolicyCheckExitCodesAndJSON(t *testing.T) {
	d := start(t)
	cases := []struct {
		argv     []string
		flags    []string
		code     int
		decision string
	}{
		{[]string{"ls", "-la"}, nil, 0, "allow"},
		{[]string{"touch", "notes.txt"}, []string{"--mode", "confirm"}, 3, "ask"},
		{[]string{"bash", "-c", "true"}, nil, 4, "deny"},
		{[]string{"sudo", "ls"}, nil, 4, "deny"},
	}
	for _, tc := range cases {
		args := append(append([]string{"policy", "check", "-o", "json"}, tc.flags...), "--")
		out, _ := expect(t, d, tc.code, append(args, tc.argv...)...)
		r := decode[checkResult](t, out)
		if r.Decision != tc.decision || r.RequestHash == "" || r.Risk == "" || r.Reasons == nil || r.Rules == nil {
			t.Errorf("%v: want decision %q with risk, reasons, rules and hash; got %+v", tc.argv, tc.decision, r)
		}
	}
	r := decode[checkResult](t, ok(t, d, "policy", "check", "-o", "json", "--", "ls"))
	if r.Risk != "low" || !strings.HasSuffix(r.ResolvedPath, "/ls") {
		t.Fatalf("ls: want low risk and the resolved path, got %+v", r)
	}
	// Table output, and --command.
	out, _ := expect(t, d, 4, "policy", "check", "--command", "sudo ls")
	if !strings.Contains(out, "decision:") || !strings.Contains(out, "deny") || !strings.Contains(out, "reasons:") {
		t.Fatalf("policy check should explain itself:\n%s", out)
	}
	expect(t, d, 2, "policy", "check")
	expect(t, d, 2, "policy", "check", "--mode", "nope", "--", "ls")
}

func TestPolicyShowReloadLint(t *testing.T) {
	d := start(t)
	out := ok(t, d, "policy", "show")
	if !strings.Contains(out, "version:") || !strings.Contains(out, "source:") {
		t.Fatalf("policy show should say which policy is active:\n%s", out)
	}
	// start's policy asks for sandboxed writes; the embedded default allows them.
	if !strings.Contains(out, "sandboxed writes:") || !strings.Contains(out, "ask (sandboxed_workspace_writes: every write asks") {
		t.Errorf("policy show should state sandboxed_workspace_writes:\n%s", out)
	}
	show := decode[struct {
		Version                  string `json:"version"`
		Text                     string `json:"text"`
		SandboxedWorkspaceWrites string `json:"sandboxed_workspace_writes"`
	}](t, ok(t, d, "policy", "show", "-o", "json"))
	if show.Version == "" || show.Text == "" || show.SandboxedWorkspaceWrites != "ask" {
		t.Fatalf("policy show -o json: %+v", show)
	}
	if def := ok(t, harness.Start(t, harness.Options{}), "policy", "show"); !strings.Contains(def, "allow (sandboxed_workspace_writes: plain writes inside the workspace") {
		t.Errorf("policy show of the embedded default should say sandboxed writes are allowed:\n%s", def)
	}
	if out := ok(t, d, "policy", "reload"); !strings.Contains(out, "policy") {
		t.Fatalf("policy reload: %q", out)
	}

	// lint is offline: no daemon at this socket.
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, policy.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("no_such_key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, d, "--socket", filepath.Join(dir, "none.sock"), "policy", "lint", good); !strings.Contains(out, "ok") {
		t.Fatalf("lint of the default policy: %q", out)
	}
	_, errOut := expect(t, d, 1, "--socket", filepath.Join(dir, "none.sock"), "policy", "lint", bad)
	if !strings.Contains(errOut, bad) {
		t.Fatalf("lint should name the file with its problem, got %q", errOut)
	}
}

// policy check shows the sandbox profile a plan would run in, and how fully
// this daemon enforces it; --sandbox narrows it, a bad value is a usage error.
func TestPolicyCheckShowsTheSandbox(t *testing.T) {
	d := start(t)
	type sb struct {
		Sandbox struct {
			Profile     string   `json:"profile"`
			Network     bool     `json:"network"`
			Exec        []string `json:"exec"`
			Enforcement string   `json:"enforcement"`
		} `json:"sandbox"`
	}
	r := decode[sb](t, ok(t, d, "policy", "check", "-o", "json", "--", "ls"))
	if r.Sandbox.Profile != "read-only" || r.Sandbox.Network || len(r.Sandbox.Exec) == 0 || r.Sandbox.Enforcement == "" {
		t.Errorf("ls: %+v, want read-only, no network, ls executable, an enforcement level", r.Sandbox)
	}
	out, _ := expect(t, d, 3, "policy", "check", "-o", "json", "--mode", "confirm", "--", "touch", "x")
	if w := decode[sb](t, out); w.Sandbox.Profile != "workspace-write" {
		t.Errorf("touch: %+v, want workspace-write", w.Sandbox)
	}
	out, _ = expect(t, d, 3, "policy", "check", "-o", "json", "--mode", "confirm", "--sandbox", "read-only", "--", "touch", "x")
	if n := decode[sb](t, out); n.Sandbox.Profile != "read-only" {
		t.Errorf("touch --sandbox read-only: %+v", n.Sandbox)
	}
	if out := ok(t, d, "policy", "check", "--", "ls"); !strings.Contains(out, "sandbox:") || !strings.Contains(out, "read-only, workspace loopback") {
		t.Errorf("the table output has no sandbox line:\n%s", out)
	}
	expect(t, d, 2, "policy", "check", "--sandbox", "everything", "--", "ls")
}
