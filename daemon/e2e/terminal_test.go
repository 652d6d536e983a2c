package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Terminal end-to-end tests: real termd, real programs on pseudo-terminals,
// driven through the TerminalService and termctl. No sleeps: every wait is
// termd's readiness wait, a stream message, or a /proc condition.

const ttySecret = "tty-secret-7f3a9c01d2"

func startTerminalDaemon(t *testing.T) *harness.Daemon {
	t.Helper()
	dir := t.TempDir()
	sec := filepath.Join(dir, "secret")
	if err := os.WriteFile(sec, []byte(ttySecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return harness.Start(t, harness.Options{Config: "secrets: [" + sec + "]\n"})
}

// ttyPlan plans argv on a terminal (as root, an operator) and approves it
// when it asks.
func ttyPlan(t *testing.T, d *harness.Daemon, argv ...string) *termdv1.Plan {
	t.Helper()
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: argv, Cwd: d.Workspace, Tty: &termdv1.TerminalOptions{Rows: 24, Cols: 80}}})
	if err != nil {
		t.Fatalf("plan %q: %v", argv, err)
	}
	p := resp.Plan
	if p.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	} else if p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("plan %q: %s %q", argv, p.State, p.Decision.Reasons)
	}
	return p
}

func ttyStart(t *testing.T, d *harness.Daemon, argv ...string) *termdv1.Execution {
	t.Helper()
	p := ttyPlan(t, d, argv...)
	r, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	return r.Execution
}

// send sends inputs with a wait and returns the answer.
func send(t *testing.T, c *client.Client, id string, w *termdv1.WaitSpec, in ...*termdv1.TerminalInput) *termdv1.SendInputResponse {
	t.Helper()
	if w == nil {
		w = &termdv1.WaitSpec{Wait: true, TimeoutMs: 20000}
	}
	r, err := c.SendInput(ctxT(t), &termdv1.SendInputRequest{ExecutionId: id, Inputs: in, Wait: w})
	if err != nil {
		t.Fatalf("send to %s: %v", id, err)
	}
	return r
}

func line(s string) *termdv1.TerminalInput {
	return &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Line{Line: s}}
}

func key(k termdv1.TerminalKey) *termdv1.TerminalInput {
	return &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Key{Key: k}}
}

func screenOf(r *termdv1.SendInputResponse) string { return client.ScreenText(r.GetScreen()) }

func wantReady(t *testing.T, r *termdv1.SendInputResponse, want termdv1.ReadyReason, onScreen string) {
	t.Helper()
	if r.Ready != want || !strings.Contains(screenOf(r), onScreen) {
		t.Fatalf("ready %s (want %s), screen (want %q):\n%s\n(offset %d, output %q, execution %v)", r.Ready, want, onScreen, screenOf(r), r.OutputOffset, r.OutputText, r.Execution)
	}
}

// waitEnd waits for an execution's receipt through its event stream.
func waitEnd(t *testing.T, c *client.Client, e *termdv1.Execution) *termdv1.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.Terminals.AttachTerminal(ctx, &termdv1.AttachTerminalRequest{ExecutionId: e.Id, SinceOffset: -1})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	g, err := c.Executions.GetExecution(ctxT(t), &termdv1.GetExecutionRequest{ExecutionId: e.Id})
	if err != nil {
		t.Fatal(err)
	}
	if g.Execution.ReceiptId == "" {
		t.Fatalf("execution %s has no receipt after its stream ended: %v", e.Id, g.Execution)
	}
	return g.Execution
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The python3 REPL, approved: a line and its answer on the screen, the
// readiness reason, detach and re-attach from a second client, a secret
// typed in redacted in events and receipt, the receipt verified offline.
func TestTerminalREPL(t *testing.T) {
	requireRoot(t)
	d := startTerminalDaemon(t)
	c := d.Client
	p := ttyPlan(t, d, "python3", "-q")
	if !strings.Contains(strings.Join(p.Decision.Reasons, ";"), "typed input is code") {
		t.Fatalf("a REPL plan must say why it asks: %q", p.Decision.Reasons)
	}
	evs, err := c.Events.StreamEvents(ctxT(t), &termdv1.StreamEventsRequest{SessionId: p.SessionId})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	e := r.Execution
	if e.Tty.GetRows() != 24 || e.InputHolder != "root" {
		t.Fatalf("execution terminal %v, holder %q", e.Tty, e.InputHolder)
	}
	wantReady(t, send(t, c, e.Id, nil), termdv1.ReadyReason_READY_REASON_WAITING_FOR_INPUT, ">>>")
	got := send(t, c, e.Id, nil, line("1+1"))
	wantReady(t, got, termdv1.ReadyReason_READY_REASON_WAITING_FOR_INPUT, "1+1\n2\n>>>")
	if !strings.Contains(got.OutputText, "2") || strings.Contains(got.OutputText, "\x1b") {
		t.Fatalf("output_text %q: want the answer, without escape codes", got.OutputText)
	}

	// Two clients attached mid-run see the same screen; the first detaches
	// (its stream is cancelled) and the execution goes on.
	screenOfAttach := func() (*termdv1.Screen, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := c.Terminals.AttachTerminal(ctx, &termdv1.AttachTerminalRequest{ExecutionId: e.Id, SinceOffset: -1})
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.Recv()
		if err != nil || m.GetScreen() == nil {
			t.Fatalf("attach: first message %v, %v", m, err)
		}
		return m.GetScreen(), cancel
	}
	s1, cancel1 := screenOfAttach()
	cancel1()
	s2, cancel2 := screenOfAttach()
	defer cancel2()
	if strings.Join(s1.Lines, "\n") != strings.Join(s2.Lines, "\n") || s1.CursorRow != s2.CursorRow || s1.CursorCol != s2.CursorCol || !strings.Contains(strings.Join(s2.Lines, "\n"), "2\n>>>") {
		t.Fatalf("re-attach shows another screen:\n%q\n%q", s1.Lines, s2.Lines)
	}

	wantReady(t, send(t, c, e.Id, nil, line("s = '"+ttySecret+"'; len(s)")), termdv1.ReadyReason_READY_REASON_WAITING_FOR_INPUT, "21")
	scr, err := c.Terminals.GetScreen(ctxT(t), &termdv1.GetScreenRequest{ExecutionId: e.Id})
	if err != nil {
		t.Fatal(err)
	}
	if text := client.ScreenText(scr.Screen); strings.Contains(text, ttySecret) {
		t.Fatalf("the screen shows the secret:\n%s", text)
	}
	wantReady(t, send(t, c, e.Id, nil, key(termdv1.TerminalKey_TERMINAL_KEY_CTRL_D)), termdv1.ReadyReason_READY_REASON_EXITED, "")
	end := waitEnd(t, c, e)
	if end.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("python3 after Ctrl-D: %s %q", end.State, end.Error)
	}

	// Events: every input, redacted, with its digest.
	var inputs []*termdv1.TerminalEvent
	for {
		m, err := evs.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if te := m.Event.GetTerminal(); te != nil && te.Kind == "input" {
			inputs = append(inputs, te)
		}
		if m.Event.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
			break
		}
	}
	if len(inputs) != 3 || inputs[0].Text != "1+1<ENTER>" || inputs[2].Text != "<CTRL_D>" || len(inputs[1].Sha256) != 64 {
		t.Fatalf("input events: %v", inputs)
	}
	if strings.Contains(inputs[1].Text, ttySecret) || !strings.Contains(inputs[1].Text, "REDACTED") {
		t.Fatalf("the typed secret is not redacted in its event: %q", inputs[1].Text)
	}

	// The receipt lists the inputs and verifies offline.
	rc := receiptJSON(t, c, end.ReceiptId)
	raw, _ := json.Marshal(rc)
	if strings.Contains(string(raw), ttySecret) {
		t.Fatal("the receipt holds the secret")
	}
	term, _ := rc["terminal"].(map[string]any)
	list, _ := term["inputs"].([]any)
	if rc["schema_version"] != "1.7" || len(list) != 3 || term["rows"] != float64(24) {
		t.Fatalf("receipt terminal: %v (schema %v)", term, rc["schema_version"])
	}
	first := list[0].(map[string]any)
	if first["text"] != "1+1<ENTER>" || first["sha256"] != inputs[0].Sha256 || first["by"] != "root" || first["kind"] != "input" {
		t.Fatalf("first input in the receipt: %v", first)
	}
	dir := t.TempDir()
	file, keyFile := filepath.Join(dir, "r.json"), filepath.Join(dir, "termd.pub")
	out, errOut, code := d.Run("termctl", "receipts", "export", end.ReceiptId)
	if code != 0 {
		t.Fatalf("export: %d %s", code, errOut)
	}
	writeFile(t, file, out)
	out, errOut, code = d.Run("termctl", "receipts", "public-key")
	if code != 0 {
		t.Fatalf("public-key: %d %s", code, errOut)
	}
	writeFile(t, keyFile, out)
	cmd := exec.Command(harness.Bin(t, "termctl"), "receipts", "verify", file, "--public-key", keyFile, "--socket", "/nonexistent/termd.sock")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("offline verify of a receipt with terminal inputs: %v\n%s", err, b)
	}
}

// A program that asks [Y/n], answered through termctl send; and a program
// that prints and then sleeps: "quiet".
func TestTerminalPromptAndQuiet(t *testing.T) {
	requireRoot(t)
	d := startTerminalDaemon(t)
	c := d.Client
	writeFile(t, filepath.Join(d.Workspace, "ask.py"), "a = input('Proceed? [Y/n] ')\nprint('answer=' + a)\n")
	e := ttyStart(t, d, "python3", "ask.py")
	wantReady(t, send(t, c, e.Id, &termdv1.WaitSpec{Wait: true, TimeoutMs: 20000, Pattern: `\[Y/n\]`}), termdv1.ReadyReason_READY_REASON_PATTERN, "Proceed? [Y/n]")
	out, errOut, code := d.Run("termctl", "send", e.Id, "--line", "n", "--wait")
	if code != 0 || !strings.Contains(out, "answer=n") || !strings.Contains(errOut, "ready: exited") {
		t.Fatalf("termctl send: %d\n%s%s", code, out, errOut)
	}
	if end := waitEnd(t, c, e); end.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("ask.py: %s", end.State)
	}

	writeFile(t, filepath.Join(d.Workspace, "quiet.py"), "import time\nprint('working', flush=True)\ntime.sleep(100)\n")
	q := ttyStart(t, d, "python3", "quiet.py")
	got := send(t, c, q.Id, &termdv1.WaitSpec{Wait: true, TimeoutMs: 20000, Pattern: "working"})
	wantReady(t, got, termdv1.ReadyReason_READY_REASON_PATTERN, "working")
	wantReady(t, send(t, c, q.Id, &termdv1.WaitSpec{Wait: true, TimeoutMs: 20000, QuietMs: 300}), termdv1.ReadyReason_READY_REASON_QUIET, "working")
	out, errOut, code = d.Run("termctl", "screen", q.Id)
	if code != 0 || strings.TrimSpace(out) != "working" {
		t.Fatalf("termctl screen: %d %q %s", code, out, errOut)
	}
	if _, err := c.Executions.CancelExecution(ctxT(t), &termdv1.CancelExecutionRequest{ExecutionId: q.Id}); err != nil {
		t.Fatal(err)
	}
}

// less on a 300-line file shows its first screen; q quits it.
func TestTerminalLess(t *testing.T) {
	requireRoot(t)
	d := startTerminalDaemon(t)
	var b strings.Builder
	for i := 1; i <= 300; i++ {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	writeFile(t, filepath.Join(d.Workspace, "long.txt"), b.String())
	e := ttyStart(t, d, "less", "long.txt")
	first := send(t, d.Client, e.Id, nil)
	wantReady(t, first, termdv1.ReadyReason_READY_REASON_WAITING_FOR_INPUT, "line 1\nline 2")
	if strings.Contains(screenOf(first), "line 30\n") || !first.Screen.Alternate {
		t.Fatalf("less should show one screen on the alternate screen:\n%s", screenOf(first))
	}
	// termctl attach shows the screen; Ctrl-] d detaches and less runs on.
	cmd := exec.Command(harness.Bin(t, "termctl"), "--socket", d.Socket, "attach", e.Id)
	cmd.Stdin = strings.NewReader("\x1dd")
	var aout, aerr strings.Builder
	cmd.Stdout, cmd.Stderr = &aout, &aerr
	if err := cmd.Run(); err != nil || !strings.Contains(aout.String(), "line 1\nline 2") || !strings.Contains(aerr.String(), "detached from "+e.Id) {
		t.Fatalf("termctl attach, then Ctrl-] d: %v\nstdout:\n%s\nstderr:\n%s", err, aout.String(), aerr.String())
	}
	if g, err := d.Client.Executions.GetExecution(ctxT(t), &termdv1.GetExecutionRequest{ExecutionId: e.Id}); err != nil || g.Execution.State != termdv1.ExecutionState_EXECUTION_STATE_RUNNING {
		t.Fatalf("after detaching: %v %v", g.GetExecution().GetState(), err)
	}
	next := send(t, d.Client, e.Id, nil, key(termdv1.TerminalKey_TERMINAL_KEY_PAGE_DOWN))
	wantReady(t, next, termdv1.ReadyReason_READY_REASON_WAITING_FOR_INPUT, "line 24")
	wantReady(t, send(t, d.Client, e.Id, nil, &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Text{Text: "q"}}), termdv1.ReadyReason_READY_REASON_EXITED, "")
	if end := waitEnd(t, d.Client, e); end.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("less after q: %s %q", end.State, end.Error)
	}
}

// Ctrl-C is a real SIGINT to the foreground process group: it interrupts
// the sleep a program runs, and the program, which handles SIGINT, goes on.
func TestTerminalCtrlC(t *testing.T) {
	requireRoot(t)
	d := startTerminalDaemon(t)
	writeFile(t, filepath.Join(d.Workspace, "fg.py"), `import signal, subprocess
signal.signal(signal.SIGINT, lambda *a: print("caught", flush=True))
print("sleeping", flush=True)
subprocess.run(["sleep", "100"])
input("after> ")
print("leader alive")
`)
	e := ttyStart(t, d, "python3", "fg.py")
	wantReady(t, send(t, d.Client, e.Id, &termdv1.WaitSpec{Wait: true, TimeoutMs: 20000, Pattern: "sleeping"}), termdv1.ReadyReason_READY_REASON_PATTERN, "sleeping")
	waitSleepIn(t, int(e.Pid))
	got := send(t, d.Client, e.Id, nil, key(termdv1.TerminalKey_TERMINAL_KEY_CTRL_C))
	wantReady(t, got, termdv1.ReadyReason_READY_REASON_WAITING_FOR_INPUT, "after>")
	if !strings.Contains(screenOf(got), "caught") {
		t.Fatalf("the leader's handler did not run:\n%s", screenOf(got))
	}
	wantReady(t, send(t, d.Client, e.Id, nil, line("")), termdv1.ReadyReason_READY_REASON_EXITED, "leader alive")
	if end := waitEnd(t, d.Client, e); end.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("fg.py after Ctrl-C: %s %q", end.State, end.Error)
	}
}

// waitSleepIn waits until a "sleep" runs in the session led by leader, so a
// Ctrl-C reaches it (a /proc condition, polled).
func waitSleepIn(t *testing.T, leader int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir("/proc")
		for _, ent := range ents {
			pid, err := strconv.Atoi(ent.Name())
			if err != nil {
				continue
			}
			stat, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(stat)
			i := strings.LastIndexByte(s, ')')
			if i < 0 || !strings.Contains(s[:i], "(sleep") {
				continue
			}
			f := strings.Fields(s[i+2:])
			if len(f) > 3 && f[3] == strconv.Itoa(leader) && pid != leader {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the foreground sleep never started")
}

// git add -p in a test repository: y to the first hunk, n to the second.
func TestTerminalGitAddPatch(t *testing.T) {
	requireRoot(t)
	d := startTerminalDaemon(t)
	gitRepo(t, d.Workspace)
	var b strings.Builder
	for i := 1; i <= 40; i++ {
		b.WriteString("row " + strconv.Itoa(i) + "\n")
	}
	orig := b.String()
	writeFile(t, filepath.Join(d.Workspace, "f.txt"), orig)
	for _, args := range [][]string{{"add", "f.txt"}, {"commit", "-q", "-m", "base"}} {
		if out, err := exec.Command("git", append([]string{"-C", d.Workspace}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	changed := strings.Replace(strings.Replace(orig, "row 2\n", "row two\n", 1), "row 38\n", "row thirty-eight\n", 1)
	writeFile(t, filepath.Join(d.Workspace, "f.txt"), changed)
	e := ttyStart(t, d, "git", "add", "-p")
	// The screen's lines carry no trailing blanks: the prompt ends in "?".
	first := send(t, d.Client, e.Id, &termdv1.WaitSpec{Wait: true, TimeoutMs: 20000, Pattern: `\(1/2\) Stage this hunk \[[^\]]*\]\?`})
	wantReady(t, first, termdv1.ReadyReason_READY_REASON_PATTERN, "+row two")
	second := send(t, d.Client, e.Id, &termdv1.WaitSpec{Wait: true, TimeoutMs: 20000, Pattern: `\(2/2\) Stage this hunk`}, line("y"))
	wantReady(t, second, termdv1.ReadyReason_READY_REASON_PATTERN, "+row thirty-eight")
	wantReady(t, send(t, d.Client, e.Id, nil, line("n")), termdv1.ReadyReason_READY_REASON_EXITED, "")
	if end := waitEnd(t, d.Client, e); end.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("git add -p: %s %q", end.State, end.Error)
	}
	staged, err := exec.Command("git", "-C", d.Workspace, "diff", "--cached").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	unstaged, _ := exec.Command("git", "-C", d.Workspace, "diff").CombinedOutput()
	if !strings.Contains(string(staged), "+row two") || strings.Contains(string(staged), "thirty-eight") || !strings.Contains(string(unstaged), "+row thirty-eight") {
		t.Fatalf("index after y/n:\nstaged:\n%s\nunstaged:\n%s", staged, unstaged)
	}
}

// termctl run --tty: plan (asks: project code), approve with --yes, attach;
// what termctl reads on stdin is typed into the program, its screen output
// comes out, and termctl exits with the program's exit code.
func TestTermctlRunTTY(t *testing.T) {
	requireRoot(t)
	d := startTerminalDaemon(t)
	writeFile(t, filepath.Join(d.Workspace, "ask.py"), "import os, sys\na = input('Proceed? [Y/n] ')\nprint('answer=' + a, 'tty=' + str(os.isatty(0)))\nsys.exit(3)\n")
	cmd := exec.Command(harness.Bin(t, "termctl"), "--socket", d.Socket, "run", "--tty", "--yes", "--cwd", d.Workspace, "--", "python3", "ask.py")
	cmd.Stdin = strings.NewReader("n\r")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if code != 3 || !strings.Contains(out.String(), "answer=n tty=True") || !strings.Contains(errOut.String(), "detach with Ctrl-] then d") {
		t.Fatalf("termctl run --tty: %v (exit %d)\nstdout:\n%s\nstderr:\n%s", err, code, out.String(), errOut.String())
	}
}
