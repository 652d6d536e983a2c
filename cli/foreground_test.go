package cli_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// receiptsWith lists the receipts of one status.
func receiptsWith(t *testing.T, d *harness.Daemon, status string) []receiptRow {
	t.Helper()
	return decode[struct {
		Receipts []receiptRow `json:"receipts"`
	}](t, ok(t, d, "receipts", "list", "--status", status, "-o", "json")).Receipts
}

// A foreground run whose termctl dies of SIGPIPE (`| head`) is cancelled,
// with a receipt, and the next run works.
func TestRunKilledByBrokenPipeCancelsExecution(t *testing.T) {
	d := start(t)
	sh := exec.Command("sh", "-c", harness.Bin(t, "termctl")+" run -- yes | head -3")
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TERMD_SOCKET=" + d.Socket, "NO_COLOR=1"}
	sh.Dir = d.Workspace
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("the pipeline failed: %v", err)
	}
	if string(out) != "y\ny\ny\n" {
		t.Fatalf("head should print three lines, got %q", out)
	}
	eventually(t, "a cancelled receipt for the abandoned `yes`", func() bool {
		return len(receiptsWith(t, d, "cancelled")) == 1
	})
	rc := receiptsWith(t, d, "cancelled")[0]
	shown := decode[struct {
		Detail string `json:"detail"`
	}](t, ok(t, d, "receipts", "show", rc.ID, "-o", "json"))
	if !strings.Contains(shown.Detail, "went away") || !strings.Contains(shown.Detail, "--detach") {
		t.Fatalf("the receipt should say the foreground client went away and how to keep a command running, got %q", shown.Detail)
	}
	if got, _ := expect(t, d, 0, "run", "--", "echo", "next"); got != "next\n" {
		t.Fatalf("the next run should work, got %q", got)
	}
}

// A detached run returns at once and keeps running after termctl exits.
func TestRunDetachKeepsRunning(t *testing.T) {
	d := start(t)
	out := ok(t, d, "run", "--detach", "-o", "json", "--", "sleep", "30")
	ex := decode[struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}](t, out)
	if ex.ID == "" {
		t.Fatalf("run --detach should print the execution, got %s", out)
	}
	time.Sleep(500 * time.Millisecond) // termctl is long gone; the command must not be
	got, err := d.Client.Executions.GetExecution(context.Background(), &termdv1.GetExecutionRequest{ExecutionId: ex.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetExecution().GetState() != termdv1.ExecutionState_EXECUTION_STATE_RUNNING {
		t.Fatalf("a detached command should keep running after termctl exits, state %v", got.GetExecution().GetState())
	}
	ok(t, d, "cancel", ex.ID)
}

// waitRunning waits until a command of the test's user is running.
func waitRunning(t *testing.T, d *harness.Daemon) {
	t.Helper()
	eventually(t, "a command to be running", func() bool {
		ls, err := d.Client.Sessions.ListSessions(context.Background(), &termdv1.ListSessionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ls.GetSessions() {
			if s.GetActiveExecutionId() != "" {
				return true
			}
		}
		return false
	})
}

// Two terminals of one user run commands at the same time.
func TestTwoConcurrentRunsSucceed(t *testing.T) {
	d := start(t)
	first := startBackground(t, d, "run", "--", "sleep", "3")
	waitRunning(t, d)
	out, errOut := expect(t, d, 0, "run", "--", "echo", "second")
	if out != "second\n" {
		t.Fatalf("the second terminal's run should print its output, got %q (%s)", out, errOut)
	}
	select {
	case <-first.done:
		t.Fatal("the second run should have run while the first was still running")
	default:
	}
	if code := first.wait(t); code != 0 {
		o, e := first.output()
		t.Fatalf("the first run should finish normally, exit %d\n%s%s", code, o, e)
	}
}

// sessions.max_running still bounds what one principal runs at once.
func TestMaxRunningCapsOnePrincipal(t *testing.T) {
	d := harness.Start(t, harness.Options{Config: "sessions:\n  max_running: 1\n"})
	startBackground(t, d, "run", "--", "sleep", "30")
	waitRunning(t, d)
	_, errOut, code := d.Run("termctl", "run", "--", "echo", "second")
	if code == 0 || !strings.Contains(errOut, "sessions.max_running") {
		t.Fatalf("a run past the cap should be refused naming sessions.max_running; exit %d: %s", code, errOut)
	}
}
