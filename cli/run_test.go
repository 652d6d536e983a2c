package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

func TestRunAllowedStreamsAndExits(t *testing.T) {
	d := start(t)
	out, errOut := expect(t, d, 0, "run", "--", "echo", "one", "two")
	if out != "one two\n" {
		t.Fatalf("stdout should hold only the command's output, got %q", out)
	}
	if !strings.Contains(errOut, "allow") {
		t.Fatalf("the decision should be shown on stderr, got %q", errOut)
	}
	expect(t, d, 1, "run", "--", "false")
	expect(t, d, 124, "run", "--timeout", "1s", "--", "sleep", "30")
}

func TestRunBlockedShowsReasons(t *testing.T) {
	d := start(t)
	_, errOut := expect(t, d, 125, "run", "--", "sudo", "true")
	if !strings.Contains(errOut, "  - ") || !strings.Contains(errOut, "nothing ran") {
		t.Fatalf("a blocked run should list the policy's reasons and say nothing ran, got %q", errOut)
	}
}

func TestRunNeedingApprovalStopsWithoutTTY(t *testing.T) {
	d := start(t)
	_, errOut := expect(t, d, 125, "run", "--mode", "confirm", "--", "touch", "stopped.txt")
	if !strings.Contains(errOut, "termctl approve ") || !strings.Contains(errOut, "needs approval") {
		t.Fatalf("the stop should name the plan and the approve command, got %q", errOut)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "stopped.txt")); err == nil {
		t.Fatal("the command ran without approval")
	}
	// The plan it left is what an operator approves.
	pending := ok(t, d, "pending")
	if !strings.Contains(pending, "touch stopped.txt") {
		t.Fatalf("the stopped plan should be pending:\n%s", pending)
	}
}

func TestRunYesApprovesOnlyWhenAllowedTo(t *testing.T) {
	d := startWithAgent(t)
	// The operator (root) may approve: --yes runs it.
	_, errOut := expect(t, d, 0, "run", "--yes", "--mode", "confirm", "--", "touch", "by-operator.txt")
	if !strings.Contains(errOut, "approved plan") {
		t.Fatalf("run --yes should say it approved the plan, got %q", errOut)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "by-operator.txt")); err != nil {
		t.Fatal("the approved command did not run")
	}
	// An agent cannot approve its own plan, --yes or not.
	out, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "run", "--yes", "--mode", "confirm", "--", "touch", "by-agent.txt")
	if code != 125 || !strings.Contains(errOut, "termctl approve ") {
		t.Fatalf("an agent's run --yes should stop with 125 and the approve command; exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "by-agent.txt")); err == nil {
		t.Fatal("an agent approved its own plan")
	}
}

// runOnTTY runs termctl under script(1) so it has a terminal, typing answer.
func runOnTTY(t *testing.T, d *harness.Daemon, answer string, args ...string) (string, int) {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		harness.Missing(t, "script(1) is needed to give termctl a terminal: install util-linux (scripts/ci-deps.sh)")
	}
	line := harness.Bin(t, "termctl")
	for _, a := range args {
		line += " '" + a + "'"
	}
	cmd := exec.Command(script, "-qec", line, "/dev/null")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TERMD_SOCKET=" + d.Socket, "NO_COLOR=1", "TERM=dumb"}
	cmd.Dir = d.Workspace
	cmd.Stdin = strings.NewReader(answer)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestRunAsksOnATerminal(t *testing.T) {
	d := start(t)
	out, code := runOnTTY(t, d, "y\n", "run", "--mode", "confirm", "--", "touch", "yes.txt")
	if code != 0 || !strings.Contains(out, "approve and run? [y/N]") || !strings.Contains(out, "request hash") {
		t.Fatalf("on a terminal run should show the canonical request and ask; exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "yes.txt")); err != nil {
		t.Fatal("the approved command did not run")
	}
	out, code = runOnTTY(t, d, "n\n", "run", "--mode", "confirm", "--", "touch", "no.txt")
	if code != 125 || !strings.Contains(out, "termctl approve ") {
		t.Fatalf("answering no should stop with 125 and the approve command; exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "no.txt")); err == nil {
		t.Fatal("the command ran although the answer was no")
	}
}

func TestRunJSONIsOneDocumentWithTheReceipt(t *testing.T) {
	d := start(t)
	parse := func(out string) map[string]any {
		t.Helper()
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("run -o json should print one JSON document: %v\n%s", err, out)
		}
		return doc
	}
	out, _ := expect(t, d, 0, "run", "-o", "json", "--", "echo", "hello")
	doc := parse(out)
	if doc["stdout"] != "hello\n" || doc["exit_code"] != float64(0) || doc["state"] != "succeeded" {
		t.Fatalf("want stdout, exit code 0 and state succeeded in the document, got %v", doc)
	}
	rid, _ := doc["receipt_id"].(string)
	if rid == "" || doc["stdout_bytes"] != float64(6) {
		t.Fatalf("the document should carry the receipt id and byte counts, got %v", doc)
	}
	if shown := ok(t, d, "receipts", "show", rid); !strings.Contains(shown, "echo hello") {
		t.Fatalf("the receipt id in the document should name the run's receipt:\n%s", shown)
	}
	// The command's own failure keeps its exit code, in the document too.
	doc = parse(func() string { o, _ := expect(t, d, 1, "run", "-o", "json", "--", "false"); return o }())
	if doc["exit_code"] != float64(1) || doc["state"] != "failed" {
		t.Fatalf("false should report exit_code 1, got %v", doc)
	}
	// Nothing ran: exit_code is null, the reasons and the error say why.
	out, _ = expect(t, d, 125, "run", "-o", "json", "--", "sudo", "true")
	doc = parse(out)
	if v, present := doc["exit_code"]; !present || v != nil || doc["error"] == nil || doc["reasons"] == nil || doc["plan_state"] != "blocked" {
		t.Fatalf("a blocked run should report exit_code null, the error and the reasons, got %v", doc)
	}
}

func TestRunNeverExitsOneOrTwoForItsOwnFailures(t *testing.T) {
	d := start(t)
	// 1 and 2 are the command's; termctl's own failures are 125.
	expect(t, d, 125, "run", "--no-such-flag", "--", "true")
	_, errOut := expect(t, d, 125, "run", "--socket", filepath.Join(t.TempDir(), "none.sock"), "--", "true")
	if !strings.Contains(errOut, "none.sock") {
		t.Fatalf("an unreachable termd should be named, got %q", errOut)
	}
	expect(t, d, 2, "run", "--", "grep", "x", "no-such-file")
}
