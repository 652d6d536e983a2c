package e2e

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/internal/harness"
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
		t.Fatalf("the agent's own plan ran as uid %q, want 65534", got)
	}
}
