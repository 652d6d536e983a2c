package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

func TestPlanShowsDecisionAndNextStep(t *testing.T) {
	d := start(t)

	p := plan(t, d, nil, "ls", "-la")
	if p.State != "planned" || p.Decision.Verdict != "allow" || p.Decision.RequestHash == "" || p.ID == "" || p.SessionID == "" {
		t.Fatalf("ls should be planned and allowed with a hash: %+v", p)
	}
	if !strings.HasSuffix(p.Decision.ResolvedPath, "/ls") {
		t.Fatalf("plan should record the resolved program, got %q", p.Decision.ResolvedPath)
	}

	ask := plan(t, d, []string{"--mode", "confirm"}, "touch", "notes.txt")
	if ask.State != "awaiting_approval" || ask.Decision.Verdict != "ask" {
		t.Fatalf("touch in confirm mode should await approval: %+v", ask)
	}

	blocked := plan(t, d, nil, "bash", "-c", "true")
	if blocked.State != "blocked" || len(blocked.Decision.Reasons) == 0 {
		t.Fatalf("bash -c should be blocked with reasons: %+v", blocked)
	}

	// The table a person reads: decision, risk, reasons, what to do next.
	out := ok(t, d, "plan", "--mode", "confirm", "--", "touch", "other.txt")
	for _, want := range []string{"decision:", "ask", "risk:", "request hash:", "reasons:", "next:"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}

	// --command is the string form; ARGV without -- works too.
	if p := decode[planJSON](t, ok(t, d, "plan", "-o", "json", "--command", "echo hi there")); strings.Join(p.Decision.Argv, "|") != "echo|hi|there" {
		t.Fatalf("--command should be split into argv, got %q", p.Decision.Argv)
	}
	if p := decode[planJSON](t, ok(t, d, "plan", "-o", "json", "echo", "-n", "x")); strings.Join(p.Decision.Argv, "|") != "echo|-n|x" {
		t.Fatalf("flags after the program belong to it, got %q", p.Decision.Argv)
	}
}

func TestPlanUsageErrors(t *testing.T) {
	d := start(t)
	_, errOut := expect(t, d, 2, "plan")
	if !strings.Contains(errOut, "no command") {
		t.Fatalf("want a usage error saying what is missing, got %q", errOut)
	}
	expect(t, d, 2, "plan", "--command", "ls", "--", "ls")
	expect(t, d, 2, "plan", "--mode", "yolo", "--", "ls")
	expect(t, d, 2, "plan", "--env", "NOEQUALS", "--", "ls")
}

func TestUnreachableDaemonIsOneLine(t *testing.T) {
	d := start(t)
	_, errOut, code := d.Run("termctl", "--socket", d.Dir+"/nothing.sock", "plan", "--", "ls")
	if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "not reachable") {
		t.Fatalf("want one line saying termd is not reachable (exit 1), got exit %d: %q", code, errOut)
	}
}

// A user who may not open the socket is told that, and how to get access,
// not that termd is down.
func TestSocketPermissionDeniedSaysSo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run termctl as another user")
	}
	d := start(t)
	// Let nobody reach the socket's directory but not the socket (0660 root).
	for dir := filepath.Dir(d.Socket); dir != d.Dir && len(dir) > 1; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(d.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "--socket", d.Socket, "status")
	if code != 1 || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, "socket_group") || strings.Contains(errOut, "not reachable") {
		t.Fatalf("want a permission message naming socket_group, got exit %d: %q", code, errOut)
	}
}

// From a checkout where `make run` is up, a relative --socket works, and the
// default socket's absence points at the make-run socket.
func TestMakeRunSocketIsFoundFromTheCheckout(t *testing.T) {
	d := start(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(d.Socket, filepath.Join(dir, ".run", "termd.sock")); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(harness.Bin(t, "termctl"), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TERMD_SOCKET=")
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return out.String(), errOut.String(), code
	}
	if out, errOut, code := run("--socket", ".run/termd.sock", "status"); code != 0 {
		t.Fatalf("relative --socket: exit %d %s %s", code, out, errOut)
	}
	_, errOut, code := run("--socket", filepath.Join(dir, "missing.sock"), "status")
	if code != 1 || !strings.Contains(errOut, "export TERMD_SOCKET="+filepath.Join(dir, ".run", "termd.sock")) {
		t.Fatalf("want a hint naming the make-run socket, got exit %d: %q", code, errOut)
	}
}
