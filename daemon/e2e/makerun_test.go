package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// termd started as `make run` starts it (scripts/run.sh): the checkout is
// the workspace, and termd's socket, state and the gateway's operator token
// are in its .run directory, which termd is told is private. No execution
// reads the token: `cat .run/gateway.token` is refused by the policy, a
// search of the whole workspace does not find it, and a program that reads
// the path without the policy seeing it (the probe) is stopped by the
// sandbox. Before, `termctl run -- cat .run/gateway.token` printed it.
func TestMakeRunStateUnreadableByExecutions(t *testing.T) {
	requireSandbox(t)
	checkout, err := os.MkdirTemp("", "termd-checkout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(checkout) })
	_ = os.Chmod(checkout, 0o755)
	checkout, _ = filepath.EvalSymlinks(checkout)
	run := filepath.Join(checkout, ".run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	const token = "tok-8f1c2b7e4a9d0c3f5e6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e"
	tokenFile := filepath.Join(run, "gateway.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := probeBin(t)
	pol := strings.Replace(testPolicy("  - {id: test.probe, program: probe, decision: allow, risk: low, reason: \"test: sandbox probe\"}"),
		"trusted_path: [", "trusted_path: ["+dir+", ", 1)
	d := harness.Start(t, harness.Options{
		Workspace: checkout,
		Socket:    filepath.Join(run, "termd.sock"),
		Policy:    pol,
		Args:      []string{"--state-dir", filepath.Join(run, "state"), "--private", run},
	})

	out, errOut, code := d.Run("termctl", "run", "--", "cat", ".run/gateway.token")
	if code != 125 || strings.Contains(out+errOut, token) || !strings.Contains(errOut, "termd's own") {
		t.Fatalf("termctl run -- cat .run/gateway.token: exit %d, want 125 (refused: termd's own files) without the token\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	out, errOut, code = d.Run("termctl", "run", "--", "grep", "-r", "-F", token[:20], ".")
	if strings.Contains(out+errOut, token[:20]) && strings.Contains(out, "gateway.token") {
		t.Fatalf("grep -r over the workspace found the gateway token (exit %d):\n%s%s", code, out, errOut)
	}
	if code == 125 {
		t.Fatalf("grep -r over the workspace should run (nothing in it names .run), got exit 125: %s", errOut)
	}
	// Covered in its mount namespace: the file is not there for it.
	if got, _, _ := probeRun(t, d, &termdv1.CommandRequest{Argv: []string{"probe", "read", tokenFile}, Sandbox: "workspace-write"}); got == "ok" {
		t.Fatalf("the probe read %s; want it hidden by the sandbox", tokenFile)
	}
	// Ordinary work in the checkout still runs.
	if out, errOut, code := d.Run("termctl", "run", "--", "cat", "notes.txt"); code != 0 || out != "notes\n" {
		t.Fatalf("cat notes.txt: exit %d: %s%s", code, out, errOut)
	}
}
