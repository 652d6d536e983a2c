package client_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The typed calls against a real termd: ids in, the object out, and the
// daemon's errors as *client.Error with their codes.
func TestTypedCalls(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st, err := c.Status(ctx)
	if err != nil || st.GetVersion() == "" || st.GetCaller().GetRole() == termdv1.Role_ROLE_UNSPECIFIED {
		t.Fatalf("Status: %v %v", st, err)
	}
	if v, err := c.Version(ctx); err != nil || v.GetVersion() != st.GetVersion() {
		t.Fatalf("Version: %v %v, status says %s", v, err, st.GetVersion())
	}

	s, err := c.CreateSession(ctx, "typed calls")
	if err != nil || s.GetId() == "" || s.GetLabel() != "typed calls" {
		t.Fatalf("CreateSession: %v %v", s, err)
	}
	if got, err := c.Session(ctx, s.GetId()); err != nil || got.GetId() != s.GetId() {
		t.Fatalf("Session: %v %v", got, err)
	}

	p, err := c.CreatePlan(ctx, s.GetId(), &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: d.Workspace})
	if err != nil || p.GetId() == "" || p.GetDecision().GetVerdict() != termdv1.Verdict_VERDICT_ALLOW {
		t.Fatalf("CreatePlan: %v %v", p, err)
	}
	if got, err := c.Plan(ctx, p.GetId()); err != nil || got.GetId() != p.GetId() || got.GetSessionId() != s.GetId() {
		t.Fatalf("Plan: %v %v", got, err)
	}
	stream, err := c.Executions.ExecuteAndWait(ctx, &termdv1.ExecuteAndWaitRequest{PlanId: p.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	execID, receiptID := "", ""
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e := m.GetEvent().GetExecution(); e.GetId() != "" {
			execID = e.GetId()
		}
		if r := m.GetEvent().GetReceipt(); r.GetId() != "" {
			receiptID = r.GetId()
		}
	}
	ex, err := c.Execution(ctx, execID)
	if err != nil || ex.GetId() != execID || ex.GetState() != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("Execution %q: %v %v", execID, ex, err)
	}
	if r, err := c.Receipt(ctx, receiptID); err != nil || r.GetSummary().GetId() != receiptID || r.GetReceiptJson() == "" {
		t.Fatalf("Receipt %q: %v %v", receiptID, r, err)
	}
	for name, call := range map[string]func(context.Context, string) (*termdv1.Execution, error){
		"PauseExecution": c.PauseExecution, "ResumeExecution": c.ResumeExecution, "CancelExecution": c.CancelExecution,
	} {
		if got, err := call(ctx, execID); client.Code(err) != codes.FailedPrecondition || got != nil {
			t.Errorf("%s of a finished execution: %v %v, want FailedPrecondition", name, got, err)
		}
	}
	if again, err := c.Replan(ctx, p.GetId()); err != nil || again.GetId() == "" || again.GetId() == p.GetId() {
		t.Fatalf("Replan: %v %v", again, err)
	}
	if _, err := c.Plan(ctx, "no-such-plan"); client.Code(err) != codes.NotFound && client.Code(err) != codes.InvalidArgument {
		t.Errorf("Plan of an unknown id: %v", err)
	}

	lint, err := c.LintPolicy(ctx, "team.yaml", []byte("version: 1\nno_such_key: 1\n"))
	if err != nil || lint.GetValid() || lint.GetLine() != 2 || lint.GetProblem() == "" {
		t.Fatalf("LintPolicy: %v %v", lint, err)
	}
}
