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

	// termctl lints through the running termd (it links no policy engine);
	// `termd policy lint` needs no daemon; both name the file and the line.
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, policy.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("no_such_key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, d, "policy", "lint", good); out != good+": ok\n" {
		t.Fatalf("lint of the default policy: %q", out)
	}
	if out := decode[map[string]any](t, ok(t, d, "policy", "lint", "-o", "json", good)); out["file"] != good || out["ok"] != true {
		t.Fatalf("lint -o json: %v", out)
	}
	_, errOut := expect(t, d, 1, "policy", "lint", bad)
	if !strings.Contains(errOut, bad+":1: ") {
		t.Fatalf("lint should name the file and line of its problem, got %q", errOut)
	}
	_, errOut = expect(t, d, 1, "--socket", filepath.Join(dir, "none.sock"), "policy", "lint", good)
	if !strings.Contains(errOut, "termd policy lint "+good) {
		t.Fatalf("lint with no daemon should point at `termd policy lint`, got %q", errOut)
	}
	_, errOut = expect(t, d, 1, "policy", "lint", filepath.Join(dir, "missing.yaml"))
	if !strings.Contains(errOut, filepath.Join(dir, "missing.yaml")+": ") {
		t.Fatalf("lint of a missing file should name it, got %q", errOut)
	}

	// termd policy lint is offline: no daemon at this socket.
	none := []string{"TERMD_SOCKET=" + filepath.Join(dir, "none.sock")}
	if out, errOut, code := d.RunEnv("termd", none, "policy", "lint", good); code != 0 || out != good+": ok\n" {
		t.Fatalf("termd policy lint of the default policy: exit %d %q %q", code, out, errOut)
	}
	if out, _, code := d.RunEnv("termd", none, "policy", "lint", "-o", "json", good); code != 0 || decode[map[string]any](t, out)["ok"] != true {
		t.Fatalf("termd policy lint -o json: exit %d %q", code, out)
	}
	if _, errOut, code := d.RunEnv("termd", none, "policy", "lint", bad); code != 1 || !strings.Contains(errOut, bad+":1: ") {
		t.Fatalf("termd policy lint of a bad file: exit %d, %q", code, errOut)
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
