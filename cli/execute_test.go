package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecuteFollowExitCodes checks the exit-code contract of
// `termctl execute --follow`: the command's own code, 124 timed out, 125
// refused, and its output on the right streams.
func TestExecuteFollowExitCodes(t *testing.T) {
	d := start(t)

	p := plan(t, d, nil, "echo", "hello from termd")
	out, _ := expect(t, d, 0, "execute", p.ID, "--follow")
	if out != "hello from termd\n" {
		t.Fatalf("stdout should be exactly the command's, got %q", out)
	}

	p = plan(t, d, nil, "ls", filepath.Join(d.Workspace, "nonexistent-path"))
	out, errOut, code := d.Run("termctl", "execute", p.ID, "--follow")
	if code == 0 || code >= 124 {
		t.Fatalf("ls of a missing path should exit with ls's own non-zero code, got %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "nonexistent-path") || strings.Contains(out, "nonexistent-path") {
		t.Fatalf("ls's complaint belongs on stderr; stdout %q stderr %q", out, errOut)
	}

	p = plan(t, d, nil, "false")
	expect(t, d, 1, "execute", p.ID, "--follow")

	p = plan(t, d, []string{"--timeout", "1s"}, "sleep", "30")
	_, errOut = expect(t, d, 124, "execute", p.ID, "--follow")
	if !strings.Contains(errOut, "timed out") {
		t.Fatalf("a timeout should be said on stderr, got %q", errOut)
	}

	// Refused: a plan awaiting approval, a blocked plan, a plan that already ran.
	ask := plan(t, d, []string{"--mode", "confirm"}, "touch", "x.txt")
	_, errOut = expect(t, d, 125, "execute", ask.ID, "--follow")
	if !strings.Contains(errOut, ask.ID) {
		t.Fatalf("the refusal should name the plan, got %q", errOut)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "x.txt")); err == nil {
		t.Fatal("an unapproved plan ran")
	}
	blocked := plan(t, d, nil, "bash", "-c", "true")
	expect(t, d, 125, "execute", blocked.ID, "--follow")
	ran := plan(t, d, nil, "true")
	expect(t, d, 0, "execute", ran.ID, "--follow")
	expect(t, d, 125, "execute", ran.ID, "--follow")
}

func TestExecuteFollowCancelledFromAnotherTermctl(t *testing.T) {
	d := start(t)
	p := plan(t, d, nil, "sleep", "30")
	follow := startBackground(t, d, "execute", p.ID, "--follow")
	// A session id means the session's running execution.
	eventually(t, "the execution to start and be cancelled", func() bool {
		_, _, code := d.Run("termctl", "cancel", p.SessionID)
		return code == 0
	})
	if code := follow.wait(t); code != 130 {
		out, errOut := follow.output()
		t.Fatalf("a cancelled command should exit 130, got %d\n%s%s", code, out, errOut)
	}
}

func TestExecuteWithoutFollowPrintsHandle(t *testing.T) {
	d := start(t)
	p := plan(t, d, nil, "echo", "later")
	ex := decode[struct {
		ID        string `json:"id"`
		PlanID    string `json:"plan_id"`
		SessionID string `json:"session_id"`
		State     string `json:"state"`
	}](t, ok(t, d, "execute", p.ID, "-o", "json"))
	if ex.ID == "" || ex.PlanID != p.ID {
		t.Fatalf("execute should print the execution handle, got %+v", ex)
	}
	out := ok(t, d, "output", ex.ID, "--follow")
	if out != "later\n" {
		t.Fatalf("output --follow should print the command's stdout, got %q", out)
	}

	p = plan(t, d, nil, "echo", "table")
	out = ok(t, d, "execute", p.ID)
	for _, want := range []string{"execution:", "termctl output ", "termctl cancel "} {
		if !strings.Contains(out, want) {
			t.Errorf("execute should say %q:\n%s", want, out)
		}
	}
}

// Ctrl-C during --follow cancels the execution (it still gets a receipt).
func TestExecuteFollowInterruptCancels(t *testing.T) {
	d := start(t)
	p := plan(t, d, nil, "sleep", "30")
	follow := startBackground(t, d, "execute", p.ID, "--follow")
	eventually(t, "the execution to start", func() bool {
		out, _, _ := d.Run("termctl", "sessions", "list", "-o", "json")
		return strings.Contains(out, `"active_execution_id"`)
	})
	_ = follow.cmd.Process.Signal(os.Interrupt)
	if code := follow.wait(t); code != 130 {
		out, errOut := follow.output()
		t.Fatalf("Ctrl-C should cancel and exit 130, got %d\n%s%s", code, out, errOut)
	}
	eventually(t, "the cancelled receipt", func() bool {
		out, _, _ := d.Run("termctl", "receipts", "list", "--session", p.SessionID, "--status", "cancelled", "-o", "json")
		return strings.Contains(out, p.ID)
	})
}
