package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/internal/harness"
	"github.com/termd/termd/internal/wire"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// An operator replans an agent's plan (it lands in the agent's session with
// the operator as requester). The agent must not be able to execute it: it
// would run with the operator's uid.
func TestAgentCannotExecuteAPlanRequestedByAnother(t *testing.T) {
	requireRoot(t)
	const probe = "id -u"
	d := harness.Start(t, harness.Options{
		Config: agentConfig,
		Policy: testPolicy(fmt.Sprintf("  - {id: test.idu, program: sh, exact: [sh, -c, %q], decision: allow, risk: low, reason: \"test: prints the uid\"}", probe)),
	})
	agent := agentClient(t, d, harness.Nobody)
	resp, err := agent.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"sh", "-c", probe}}})
	if err != nil {
		t.Fatal(err)
	}
	approve := func(p *termdv1.Plan) {
		t.Helper()
		if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
			return
		}
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	}
	// The operator refreshes it (e.g. "replan" in the console) and approves it.
	rp, err := d.Client.Plans.Replan(ctxT(t), &termdv1.ReplanRequest{PlanId: resp.Plan.Id})
	if err != nil {
		t.Fatal(err)
	}
	if rp.Plan.SessionId != resp.Plan.SessionId || rp.Plan.Requester.Uid != 0 {
		t.Fatalf("replan: session %s requester %v", rp.Plan.SessionId, rp.Plan.Requester)
	}
	approve(rp.Plan)
	ex, err := agent.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: rp.Plan.Id})
	if err == nil {
		fin := waitFinal(t, d.Client, ex.Execution.Id)
		out, _ := d.Client.Executions.ReadOutput(ctxT(t), &termdv1.ReadOutputRequest{ExecutionId: fin.Id})
		t.Fatalf("the agent executed a plan requested by the operator; it ran as uid %q", strings.TrimSpace(string(out.GetData())))
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("want PermissionDenied, got %v", err)
	}
	// The agent's own plan still runs, as the agent.
	own, err := agent.Plans.Replan(ctxT(t), &termdv1.ReplanRequest{PlanId: resp.Plan.Id})
	if err != nil {
		t.Fatal(err)
	}
	approve(own.Plan)
	ex, err = agent.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: own.Plan.Id})
	if err != nil {
		t.Fatal(err)
	}
	fin := waitFinal(t, d.Client, ex.Execution.Id)
	out, _ := d.Client.Executions.ReadOutput(ctxT(t), &termdv1.ReadOutputRequest{ExecutionId: fin.Id})
	if got := strings.TrimSpace(string(out.GetData())); got != "65534" {
		t.Fatalf("the agent's own plan ran as uid %q, want 65534 (state %v: %s)", got, fin.State, fin.Error)
	}
}

// What holds: a second agent sees nothing of the first; an agent cannot
// approve (not even by asking for the operator role in metadata), cannot ask
// for a weaker mode, and a plan runs once however many Execute calls race.
func TestAgentIsolationAndSingleExecution(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{AskWrites: true, Config: "socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534, 65533]\n"})
	a := agentClient(t, d, harness.Nobody)
	other := agentClient(t, d, &syscall.Credential{Uid: 65533, Gid: 65534})

	ls := plan(t, a, "", "ls")
	ex, err := a.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: ls.Id})
	if err != nil {
		t.Fatal(err)
	}
	fin := waitFinal(t, d.Client, ex.Execution.Id)
	write, err := a.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: ls.SessionId, Request: &termdv1.CommandRequest{Argv: []string{"touch", "x"}}})
	if err != nil || write.Plan.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("write plan: %v %v", write, err)
	}

	notFound := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.NotFound {
			t.Errorf("%s by another agent: want NotFound, got %v", what, err)
		}
	}
	_, err = other.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: ls.Id})
	notFound("GetPlan", err)
	_, err = other.Sessions.GetSession(ctxT(t), &termdv1.GetSessionRequest{SessionId: ls.SessionId})
	notFound("GetSession", err)
	_, err = other.Executions.GetExecution(ctxT(t), &termdv1.GetExecutionRequest{ExecutionId: fin.Id})
	notFound("GetExecution", err)
	_, err = other.Executions.ReadOutput(ctxT(t), &termdv1.ReadOutputRequest{ExecutionId: fin.Id})
	notFound("ReadOutput", err)
	_, err = other.Receipts.GetReceipt(ctxT(t), &termdv1.GetReceiptRequest{ReceiptId: fin.ReceiptId})
	notFound("GetReceipt", err)
	_, err = other.Receipts.ExportReceipt(ctxT(t), &termdv1.ExportReceiptRequest{ReceiptId: fin.ReceiptId})
	notFound("ExportReceipt", err)
	_, err = other.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: write.Plan.Id})
	notFound("Execute", err)
	_, err = other.Plans.Replan(ctxT(t), &termdv1.ReplanRequest{PlanId: ls.Id})
	notFound("Replan", err)
	st, err := other.Events.StreamEvents(ctxT(t), &termdv1.StreamEventsRequest{SessionId: ls.SessionId})
	if err == nil {
		_, err = st.Recv()
	}
	notFound("StreamEvents", err)
	rs, err := other.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{Principal: "uid:65534"})
	if err != nil || len(rs.Receipts) != 0 {
		t.Errorf("ListReceipts with another agent's principal: %v %v", rs, err)
	}
	ss, _ := other.Sessions.ListSessions(ctxT(t), &termdv1.ListSessionsRequest{IncludeClosed: true})
	if len(ss.GetSessions()) != 0 {
		t.Errorf("another agent listed %d sessions", len(ss.GetSessions()))
	}
	// Everything visible on the all-sessions stream is the caller's own.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if all, err := other.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{}); err == nil {
		for {
			ev, err := all.Recv()
			if err != nil {
				break
			}
			if ev.Event.SessionId == ls.SessionId {
				t.Fatalf("another agent's all-sessions stream carried %v", ev.Event.Kind)
			}
		}
	}

	// No self-approval, not even with the role metadata a transport may send.
	up := metadata.AppendToOutgoingContext(ctxT(t), wire.MDRole, "operator", wire.MDName, "root")
	if _, err := a.Plans.ApprovePlan(up, &termdv1.ApprovePlanRequest{PlanId: write.Plan.Id, RequestHash: write.Plan.Decision.RequestHash}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("agent approving its own plan with operator metadata: %v", err)
	}
	// The transport word is copied into every record: a huge one is refused
	// (one 12 MB value bloated the journal and broke the operator's queue).
	huge := metadata.AppendToOutgoingContext(ctxT(t), wire.MDVia, strings.Repeat("<", 1<<20))
	if _, err := a.Plans.CreatePlan(huge, &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"ls"}}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a 1 MiB %s: %v", wire.MDVia, err)
	}
	if _, err := a.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"touch", "y"}, Mode: termdv1.Mode_MODE_TRUSTED}}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("agent asking for trusted mode: %v", err)
	}
	if _, err := a.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: write.Plan.Id}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("executing an unapproved plan: %v", err)
	}

	// Racing Execute calls start the plan once.
	race := plan(t, a, ls.SessionId, "ls")
	var wg sync.WaitGroup
	var started atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: race.Id}); err == nil {
				started.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := started.Load(); n != 1 {
		t.Fatalf("%d concurrent Execute calls started the plan, want exactly 1", n)
	}
}

// An operator plans in trusted mode inside an agent's session; the agent
// replans it. The agent's plan must be decided in a mode the agent may ask
// for, so the write needs approval again (it did not: red-team finding).
func TestAgentReplanDoesNotInheritAnOperatorsTrustedMode(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{Config: agentConfig, AskWrites: true}) // touch: a write that asks in confirm mode
	agent := agentClient(t, d, harness.Nobody)
	mine, err := agent.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"ls"}}})
	if err != nil {
		t.Fatal(err)
	}
	op, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: mine.Plan.SessionId,
		Request: &termdv1.CommandRequest{Argv: []string{"touch", "pwned"}, Mode: termdv1.Mode_MODE_TRUSTED}})
	if err != nil {
		t.Fatal(err)
	}
	if op.Plan.Decision.Verdict != termdv1.Verdict_VERDICT_ALLOW {
		t.Fatalf("the operator's trusted plan should be allowed: %v", op.Plan.Decision)
	}
	rp, err := agent.Plans.Replan(ctxT(t), &termdv1.ReplanRequest{PlanId: op.Plan.Id})
	if err != nil {
		t.Fatal(err)
	}
	if rp.Plan.Decision.Mode == termdv1.Mode_MODE_TRUSTED || rp.Plan.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("the agent's replan kept trusted mode: mode %v state %v", rp.Plan.Decision.Mode, rp.Plan.State)
	}
	if _, err := agent.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: rp.Plan.Id}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("executing the agent's unapproved replan: want FailedPrecondition, got %v", err)
	}
	// An operator's own replan keeps the mode it asked for.
	orp, err := d.Client.Plans.Replan(ctxT(t), &termdv1.ReplanRequest{PlanId: op.Plan.Id})
	if err != nil || orp.Plan.Decision.Mode != termdv1.Mode_MODE_TRUSTED {
		t.Fatalf("operator replan: %v %v", orp, err)
	}
}

// The operator approves `make` after reading the Makefile; the Makefile is
// changed before the run. The approval must not cover the new recipe.
func TestApprovalDoesNotCoverAMakefileChangedAfterIt(t *testing.T) {
	// With the sandbox enforced, offline make runs without approval
	// (TestSandboxProjectCodeWithoutApproval); where an approval is given
	// (sandbox off or partial, network) it must bind the Makefile.
	d := harness.Start(t, harness.Options{Config: "sandbox: off\n"})
	mk := filepath.Join(d.Workspace, "Makefile")
	if err := os.WriteFile(mk, []byte("all:\n\techo reviewed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := plan(t, d.Client, "", "make")
	if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("make should need approval: %v %v", p.State, p.Decision.Reasons)
	}
	if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mk, []byte("all:\n\techo swapped after approval\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "stale") || !strings.Contains(err.Error(), "Makefile") {
		t.Fatalf("running an approved make after its Makefile changed: want a stale-plan refusal naming the Makefile, got %v", err)
	}
}
