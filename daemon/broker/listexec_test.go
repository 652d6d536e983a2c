package broker

import (
	"context"
	"testing"
	"time"

	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// ListExecutions shows a principal what it runs in the background, with
// the same visibility as plans: an agent sees only its own sessions'
// executions, an operator everyone's; the state filter and the limit hold.
func TestListExecutions(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	other := &termdv1.Principal{Uid: 65533, Gid: 65534, Name: "other", Role: termdv1.Role_ROLE_AGENT}
	mine := r.session(t, agent)
	theirs := r.session(t, other)

	long := r.plan(t, agent, mine, "sleep", "30")
	running, err := r.Execute(ctx, agent, long.Id, mine)
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Second)
	if st, err := r.run(t, agent, r.plan(t, agent, mine, "true")); err != nil || st != termdv1.PlanState_PLAN_STATE_SUCCEEDED {
		t.Fatalf("true: %v %v", st, err)
	}
	if st, err := r.run(t, other, r.plan(t, other, theirs, "true")); err != nil || st != termdv1.PlanState_PLAN_STATE_SUCCEEDED {
		t.Fatalf("other's true: %v %v", st, err)
	}

	active := []termdv1.ExecutionState{termdv1.ExecutionState_EXECUTION_STATE_RUNNING, termdv1.ExecutionState_EXECUTION_STATE_PAUSED}
	got, err := r.ListExecutions(ctx, agent, &termdv1.ListExecutionsRequest{States: active})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Execution.Id != running.Id || got[0].Argv[1] != "30" || got[0].Cwd != r.ws || got[0].SessionLabel != "test" {
		t.Fatalf("agent's running executions: %v, want only %s (sleep 30)", got, running.Id)
	}
	all, err := r.ListExecutions(ctx, agent, &termdv1.ListExecutionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Execution.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED || all[1].Execution.Id != running.Id {
		t.Fatalf("agent's executions, newest first: %v", all)
	}
	for _, e := range all {
		if e.Execution.SessionId != mine {
			t.Errorf("agent sees execution %s of session %s", e.Execution.Id, e.Execution.SessionId)
		}
	}
	if _, err := r.ListExecutions(ctx, agent, &termdv1.ListExecutionsRequest{SessionId: theirs}); err == nil {
		t.Error("an agent listed another principal's session")
	} else {
		wantErr(t, err, errdefs.KindNotFound, "not found")
	}
	ops, err := r.ListExecutions(ctx, operator, &termdv1.ListExecutionsRequest{})
	if err != nil || len(ops) != 3 {
		t.Fatalf("operator sees %d executions (%v), want 3", len(ops), err)
	}
	one, err := r.ListExecutions(ctx, operator, &termdv1.ListExecutionsRequest{Limit: 1})
	if err != nil || len(one) != 1 {
		t.Fatalf("limit 1: %d (%v)", len(one), err)
	}
	_, err = r.ListExecutions(ctx, agent, &termdv1.ListExecutionsRequest{States: []termdv1.ExecutionState{42}})
	wantErr(t, err, errdefs.KindInvalid, "state 42", "running")
	_, err = r.ListExecutions(ctx, agent, &termdv1.ListExecutionsRequest{Limit: -1})
	wantErr(t, err, errdefs.KindInvalid, "limit -1")

	if _, err := r.CancelExecution(ctx, agent, running.Id); err != nil {
		t.Fatal(err)
	}
	got, err = r.ListExecutions(ctx, agent, &termdv1.ListExecutionsRequest{States: active})
	if err != nil || len(got) != 0 {
		t.Fatalf("after cancel, running: %v (%v)", got, err)
	}
}
