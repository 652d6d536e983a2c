package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/client"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// grandchildScript leaves a setsid grandchild behind and prints its pid.
const grandchildScript = "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; sleep 30"

// testPolicy is the default policy plus the exact forms these tests need.
func testPolicy(extra ...string) string {
	p := string(policy.DefaultYAML())
	p += fmt.Sprintf("  - {id: test.grandchild, program: sh, exact: [sh, -c, %q], decision: allow, risk: high, reason: \"test: leaves a setsid grandchild\"}\n", grandchildScript)
	for _, e := range extra {
		p += e + "\n"
	}
	return p
}

func trustedPlan(t *testing.T, c *client.Client, session string, timeout uint32, argv ...string) *termdv1.Plan {
	t.Helper()
	resp, err := c.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: session, Request: &termdv1.CommandRequest{
		Argv: argv, Mode: termdv1.Mode_MODE_TRUSTED, TimeoutSeconds: timeout}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Plan.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("plan %q: %v %v", argv, resp.Plan.State, resp.Plan.Decision.Reasons)
	}
	return resp.Plan
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie is not alive.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// startGrandchild runs the grandchild script and returns the execution and the grandchild pid.
func startGrandchild(t *testing.T, d *harness.Daemon, timeout uint32) (*termdv1.Execution, int) {
	t.Helper()
	p := trustedPlan(t, d.Client, "", timeout, "sh", "-c", grandchildScript)
	resp, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	waitFor(t, func() bool {
		out, err := d.Client.Executions.ReadOutput(ctxT(t), &termdv1.ReadOutputRequest{ExecutionId: resp.Execution.Id})
		if err != nil {
			return false
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(string(out.Data)))
		return pid > 0
	}, "the grandchild's pid on stdout")
	if !alive(pid) {
		t.Fatalf("grandchild %d is not running", pid)
	}
	return resp.Execution, pid
}

func waitFinal(t *testing.T, c *client.Client, id string) *termdv1.Execution {
	t.Helper()
	var e *termdv1.Execution
	waitFor(t, func() bool {
		r, err := c.Executions.GetExecution(ctxT(t), &termdv1.GetExecutionRequest{ExecutionId: id})
		if err != nil {
			t.Fatal(err)
		}
		e = r.Execution
		return e.ReceiptId != ""
	}, "execution "+id+" to finish")
	return e
}

func TestTimeoutKillsEverythingItStarted(t *testing.T) {
	d := harness.Start(t, harness.Options{Policy: testPolicy()})
	ex, pid := startGrandchild(t, d, 1)
	e := waitFinal(t, d.Client, ex.Id)
	if e.State != termdv1.ExecutionState_EXECUTION_STATE_TIMED_OUT {
		t.Fatalf("state %v, want timed_out", e.State)
	}
	waitFor(t, func() bool { return !alive(pid) }, "the setsid grandchild to be gone")
	if r := receiptJSON(t, d.Client, e.ReceiptId); r["status"] != "timed_out" {
		t.Fatalf("receipt status %v", r["status"])
	}
}

func TestCancelKillsEverythingItStarted(t *testing.T) {
	d := harness.Start(t, harness.Options{Policy: testPolicy()})
	ex, pid := startGrandchild(t, d, 60)
	resp, err := d.Client.Executions.CancelExecution(ctxT(t), &termdv1.CancelExecutionRequest{ExecutionId: ex.Id})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Execution.State != termdv1.ExecutionState_EXECUTION_STATE_CANCELLED || resp.Execution.ReceiptId == "" {
		t.Fatalf("cancel: %v", resp.Execution)
	}
	waitFor(t, func() bool { return !alive(pid) }, "the setsid grandchild to be gone")
}

func TestPauseResumeAndCancelWhilePaused(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	p := plan(t, d.Client, "", "sleep", "1")
	ex, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	id := ex.Execution.Id
	ps, err := d.Client.Executions.PauseExecution(ctxT(t), &termdv1.PauseExecutionRequest{ExecutionId: id})
	if err != nil || ps.Execution.State != termdv1.ExecutionState_EXECUTION_STATE_PAUSED {
		t.Fatalf("pause: %v %v", ps, err)
	}
	gp, _ := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: p.Id})
	if gp.Plan.State != termdv1.PlanState_PLAN_STATE_PAUSED {
		t.Fatalf("plan state %v, want paused", gp.Plan.State)
	}
	// sleep 1 cannot finish while frozen.
	time.Sleep(1500 * time.Millisecond)
	g, _ := d.Client.Executions.GetExecution(ctxT(t), &termdv1.GetExecutionRequest{ExecutionId: id})
	if g.Execution.State != termdv1.ExecutionState_EXECUTION_STATE_PAUSED {
		t.Fatalf("a paused command finished: %v", g.Execution.State)
	}
	if _, err := d.Client.Executions.ResumeExecution(ctxT(t), &termdv1.ResumeExecutionRequest{ExecutionId: id}); err != nil {
		t.Fatal(err)
	}
	if e := waitFinal(t, d.Client, id); e.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("after resume: %v", e.State)
	}

	p2 := plan(t, d.Client, "", "sleep", "30")
	ex2, _ := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p2.Id})
	d.Client.Executions.PauseExecution(ctxT(t), &termdv1.PauseExecutionRequest{ExecutionId: ex2.Execution.Id})
	c, err := d.Client.Executions.CancelExecution(ctxT(t), &termdv1.CancelExecutionRequest{ExecutionId: ex2.Execution.Id})
	if err != nil || c.Execution.State != termdv1.ExecutionState_EXECUTION_STATE_CANCELLED {
		t.Fatalf("cancel while paused: %v %v", c, err)
	}
}

func TestFinalStates(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	ex, rec, _, _ := runToEnd(t, d.Client, plan(t, d.Client, "", "false"))
	if ex.State != termdv1.ExecutionState_EXECUTION_STATE_FAILED || ex.ExitCode != 1 || rec.Status != "failed" {
		t.Fatalf("false: %v exit %d receipt %v", ex.State, ex.ExitCode, rec.Status)
	}
	// Killed from outside: SIGKILL to the command's own process.
	p := plan(t, d.Client, "", "sleep", "30")
	e, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return alive(int(e.Execution.Pid)) }, "sleep to start")
	syscall.Kill(int(e.Execution.Pid), syscall.SIGKILL)
	if f := waitFinal(t, d.Client, e.Execution.Id); f.State != termdv1.ExecutionState_EXECUTION_STATE_KILLED || f.Signal != "SIGKILL" {
		t.Fatalf("killed from outside: %v %q", f.State, f.Signal)
	}
}

func TestPlanRunsOnlyInItsOwnSession(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	s1, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	s2, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	p := plan(t, d.Client, s1.Session.Id, "true")
	_, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id, SessionId: s2.Session.Id})
	if err == nil || !strings.Contains(err.Error(), "its own session") {
		t.Fatalf("want refusal; got %v", err)
	}
}

func TestOutputOverCapIsTruncatedWithFullCountAndDigest(t *testing.T) {
	pol := strings.Replace(testPolicy(), "output_bytes: 1048576", "output_bytes: 65536", 1)
	d := harness.Start(t, harness.Options{Policy: pol})
	os.WriteFile(filepath.Join(d.Workspace, "big.txt"), []byte(strings.Repeat("0123456789abcdef", 300000/16)[:300000]), 0o644)
	_, rec, _, _ := runToEnd(t, d.Client, plan(t, d.Client, "", "cat", "big.txt"))
	r := receiptJSON(t, d.Client, rec.Id)
	if r["stdout_bytes"].(float64) != 300000 || r["output_truncated"] != true || len(r["stdout"].(string)) != 65536 {
		t.Fatalf("bytes %v truncated %v kept %d", r["stdout_bytes"], r["output_truncated"], len(r["stdout"].(string)))
	}
	if dg, _ := r["stdout_digest"].(string); len(dg) != 64 {
		t.Fatalf("stdout digest %q", dg)
	}
	// Binary output is counted and digested but not copied into the receipt.
	_, rec, _, _ = runToEnd(t, d.Client, plan(t, d.Client, "", "head", "-c", "1000", "/dev/zero"))
	r = receiptJSON(t, d.Client, rec.Id)
	if r["stdout_bytes"].(float64) != 1000 || !strings.Contains(r["stdout"].(string), "binary output") {
		t.Fatalf("binary output in the receipt: %v %q", r["stdout_bytes"], r["stdout"])
	}
}

func TestSessionSubscribersAreIsolated(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	s1, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	s2, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	collect := func(sid string) <-chan []*termdv1.Event {
		ch := make(chan []*termdv1.Event, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := d.Client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SessionId: sid})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer cancel()
			var evs []*termdv1.Event
			for {
				m, err := st.Recv()
				if err != nil {
					ch <- evs
					return
				}
				evs = append(evs, m.Event)
			}
		}()
		return ch
	}
	c1, c2 := collect(s1.Session.Id), collect(s2.Session.Id)
	runToEnd(t, d.Client, plan(t, d.Client, s1.Session.Id, "echo", "one"))
	runToEnd(t, d.Client, plan(t, d.Client, s2.Session.Id, "echo", "two"))
	d.Client.Sessions.CloseSession(ctxT(t), &termdv1.CloseSessionRequest{SessionId: s1.Session.Id})
	d.Client.Sessions.CloseSession(ctxT(t), &termdv1.CloseSessionRequest{SessionId: s2.Session.Id})
	for i, ch := range []<-chan []*termdv1.Event{c1, c2} {
		want := []string{s1.Session.Id, s2.Session.Id}[i]
		evs := <-ch
		var out string
		for _, e := range evs {
			if e.SessionId != want {
				t.Fatalf("subscriber of %s saw an event of %s", want, e.SessionId)
			}
			out += string(e.GetOutput().GetData())
		}
		if wantOut := []string{"one\n", "two\n"}[i]; out != wantOut || evs[len(evs)-1].Kind != termdv1.EventKind_EVENT_KIND_SESSION_CLOSED {
			t.Fatalf("session %d: output %q, last event %v", i, out, evs[len(evs)-1].Kind)
		}
	}
}

func TestSlowSubscriberLagsAndResumes(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	s, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := d.Client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SessionId: s.Session.Id})
	if err != nil {
		t.Fatal(err)
	}
	// 64 MiB of output (far more than the session ring holds) while nobody reads.
	runToEnd(t, d.Client, plan(t, d.Client, s.Session.Id, "head", "-c", "67108864", "/dev/zero"))
	var lagged *termdv1.Event
	var last *termdv1.Event
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if m.Event.Kind == termdv1.EventKind_EVENT_KIND_LAGGED && lagged == nil {
			lagged = m.Event
		}
		last = m.Event
		if last.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
			break
		}
	}
	if lagged == nil || lagged.GetLagged().Dropped == 0 {
		t.Fatalf("a slow subscriber should be told it lagged; last %v", last.Kind)
	}
	// Resuming from the lagged event's resume point works and replays what is still held.
	st2, err := d.Client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SessionId: s.Session.Id, SinceSeq: last.Seq - 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st2.Recv()
	if err != nil || m.Event.Seq != last.Seq {
		t.Fatalf("resume from %d: got %v %v", last.Seq-1, m, err)
	}
}

func TestClosingSessionCancelsItsExecution(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	p := plan(t, d.Client, "", "sleep", "30")
	ex, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Sessions.CloseSession(ctxT(t), &termdv1.CloseSessionRequest{SessionId: p.SessionId}); err != nil {
		t.Fatal(err)
	}
	e := waitFinal(t, d.Client, ex.Execution.Id)
	if e.State != termdv1.ExecutionState_EXECUTION_STATE_CANCELLED {
		t.Fatalf("state %v", e.State)
	}
	if r := receiptJSON(t, d.Client, e.ReceiptId); r["status"] != "cancelled" || !strings.Contains(fmt.Sprint(r["detail"]), "session closed") {
		t.Fatalf("receipt %v %v", r["status"], r["detail"])
	}
}

func TestCommandCannotCallBackIntoTermd(t *testing.T) {
	termctl := harness.Bin(t, "termctl")
	dir, err := os.MkdirTemp("", "termd-callback-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "run", "termd.sock")
	d := harness.Start(t, harness.Options{Socket: sock, Policy: testPolicy(fmt.Sprintf(
		"  - {id: test.callback, program: termctl, path: %s, exact: [%s, --socket, %s, status], decision: allow, risk: high, reason: \"test: calls back\"}", termctl, termctl, sock))})
	// Run for root, the command is an unprivileged uid on the host: the
	// socket (0660, root's) refuses it before termd sees it.
	p := trustedPlan(t, d.Client, "", 30, termctl, "--socket", sock, "status")
	p.Request = nil
	ex, _, _, stderr := runToEnd(t, d.Client, p)
	if ex.State == termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED || !strings.Contains(stderr, "permission denied") {
		t.Fatalf("a command started by termd for root reached the daemon's socket: %v %q", ex.State, stderr)
	}
	// As real root (a privileged plan, approved), it connects, and termd
	// refuses a process it started.
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{
		Argv: []string{termctl, "--socket", sock, "status"}, Mode: termdv1.Mode_MODE_TRUSTED, TimeoutSeconds: 30, Privileged: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: resp.Plan.Id, RequestHash: resp.Plan.Decision.RequestHash}); err != nil {
		t.Fatal(err)
	}
	ex, _, _, stderr = runToEnd(t, d.Client, resp.Plan)
	if ex.State == termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("a command started by termd reached the daemon")
	}
	if !strings.Contains(d.Log(), "refused a connection from a process termd started") {
		t.Fatalf("the daemon should log the refusal; stderr %q\n%s", stderr, d.Log())
	}
}

func TestKill9DuringRunGivesOutcomeUnknown(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	p := plan(t, d.Client, "", "sleep", "30")
	ex, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return alive(int(ex.Execution.Pid)) }, "sleep to start")
	// The spawn pool's cgroups sit beside the execution's: the crashed
	// daemon's are removed when it starts again.
	parent := execCgroupParent(t, int(ex.Execution.Pid))
	pooled := func(pid int) int {
		entries, _ := os.ReadDir(parent)
		n := 0
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), fmt.Sprintf("p-%d-", pid)) {
				n++
			}
		}
		return n
	}
	old := d.Pid()
	if parent != "" {
		waitFor(t, func() bool { return pooled(old) > 0 }, "the spawn pool to hold cgroups")
	}
	d.Kill9()
	d.Restart()
	waitFor(t, func() bool { return !alive(int(ex.Execution.Pid)) }, "the orphaned command to be gone")
	if parent != "" {
		if n := pooled(old); n != 0 {
			t.Errorf("%d pooled cgroups of the crashed termd are left in %s", n, parent)
		}
	}
	rs, err := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{Status: "outcome_unknown"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Receipts) != 1 || rs.Receipts[0].PlanId != p.Id {
		t.Fatalf("want one outcome_unknown receipt for the plan; got %v", rs.Receipts)
	}
	ch, err := d.Client.Receipts.VerifyAuditChain(ctxT(t), &termdv1.VerifyAuditChainRequest{})
	if err != nil || !ch.Ok {
		t.Fatalf("chain after kill -9: %v %v", ch, err)
	}
	g, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: p.Id})
	if err != nil || g.Plan.State != termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN || g.Plan.ReceiptId != rs.Receipts[0].Id {
		t.Fatalf("the interrupted plan after restart: %v %v", g, err)
	}
	if _, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id}); err == nil {
		t.Fatal("an interrupted plan must not run again")
	}
}

func TestPlansAndApprovalsSurviveACrash(t *testing.T) {
	d := harness.Start(t, harness.Options{AskWrites: true})
	waiting := plan(t, d.Client, "", "touch", "a.txt")
	approved := plan(t, d.Client, waiting.SessionId, "touch", "b.txt")
	if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: approved.Id, RequestHash: approved.Decision.RequestHash}); err != nil {
		t.Fatal(err)
	}
	d.Kill9()
	d.Restart()
	g, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: waiting.Id})
	if err != nil || g.Plan.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("awaiting plan after a crash: %v %v", g, err)
	}
	g2, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: approved.Id})
	if err != nil || g2.Plan.State != termdv1.PlanState_PLAN_STATE_APPROVED || g2.Plan.Approval.GetApprover() == nil {
		t.Fatalf("approved plan after a crash: %v %v", g2, err)
	}
	ex, _, _, _ := runToEnd(t, d.Client, g2.Plan)
	if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("the approval survived but the run failed: %v %s", ex.State, ex.Error)
	}
	if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: waiting.Id, RequestHash: waiting.Decision.RequestHash}); err != nil {
		t.Fatalf("approving a plan from before the crash: %v", err)
	}
}

// A request too large to keep is refused before it is journalled, and a
// journal that nonetheless holds an oversized record (damage) does not stop
// termd from starting: the plans around it survive.
func TestHugeRequestsCannotBreakTheJournal(t *testing.T) {
	d := harness.Start(t, harness.Options{AskWrites: true})
	kept := plan(t, d.Client, "", "touch", "kept.txt")
	huge := []string{"ls"}
	for range 60 {
		huge = append(huge, strings.Repeat("\x01", 64000))
	}
	_, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: huge}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "put long input in a file") {
		t.Fatalf("a 3.8 MB request: want InvalidArgument saying what to do, got %v", err)
	}
	d.Stop()
	journal := filepath.Join(d.StateDir, "plans.jsonl")
	if fi, err := os.Stat(journal); err != nil || fi.Size() > 1<<20 {
		t.Fatalf("the refused request reached the journal: %v %v", fi, err)
	}
	// Damage: a 70 MB line in the middle of the journal.
	f, err := os.OpenFile(journal, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(bytes.Repeat([]byte("x"), 70<<20), '\n')); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d.Restart()
	g, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: kept.Id})
	if err != nil || g.Plan.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("the plan before the damaged record: %v %v", g, err)
	}
}

// A command that prints a line and then works is seen live: its output
// event arrives while it still runs (the redactor used to hold back the
// last 4 KiB until the command ended, so short output came only at the end).
func TestShortOutputArrivesWhileTheCommandRuns(t *testing.T) {
	// The command waits up to 10 s for the test to react to its first line.
	const script = "echo first; i=0; while [ ! -e go ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; if [ -e go ]; then echo second; else echo unseen; fi"
	d := harness.Start(t, harness.Options{Policy: testPolicy(fmt.Sprintf("  - {id: test.waits, program: sh, exact: [sh, -c, %q], decision: allow, risk: high, reason: \"test: prints, then waits for a file\"}", script))})
	p := plan(t, d.Client, "", "sh", "-c", script)
	if p.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := d.Client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SessionId: p.SessionId})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("the stream ended before the first line arrived: %v", err)
		}
		if o := m.Event.GetOutput(); o != nil && strings.Contains(string(o.Data), "first") {
			break
		}
	}
	g, err := d.Client.Executions.GetExecution(ctxT(t), &termdv1.GetExecutionRequest{ExecutionId: ex.Execution.Id})
	if err != nil {
		t.Fatal(err)
	}
	if g.Execution.State != termdv1.ExecutionState_EXECUTION_STATE_RUNNING {
		t.Fatalf("the first line arrived only when the command had ended (%v): output is not live", g.Execution.State)
	}
	if err := os.WriteFile(filepath.Join(d.Workspace, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fin := waitFinal(t, d.Client, ex.Execution.Id)
	out, _ := d.Client.Executions.ReadOutput(ctxT(t), &termdv1.ReadOutputRequest{ExecutionId: fin.Id})
	if string(out.GetData()) != "first\nsecond\n" {
		t.Fatalf("output %q: the first line was not delivered while the command waited for it", out.GetData())
	}
}

// execCgroupParent is the directory holding the v2 cgroup process pid runs
// in, when it is a termd execution's ("" otherwise).
func execCgroupParent(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	mount := ""
	for _, m := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(m, "cgroup.controllers")); err == nil {
			mount = m
			break
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rel, ok := strings.CutPrefix(line, "0::"); ok && mount != "" && strings.Contains(rel, "/termd/") {
			return filepath.Join(mount, filepath.Dir(rel))
		}
	}
	return ""
}
