package broker

import (
	"context"
	"testing"

	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// sessions.max_running caps a principal's unfinished executions across its
// sessions: finished, cancelled and refused ones stop counting, and another
// principal has its own count.
func TestMaxRunningPerPrincipal(t *testing.T) {
	r := newRig(t)
	r.Config().Sessions.MaxRunning = 2
	ctx := context.Background()
	other := &termdv1.Principal{Uid: 65533, Gid: 65534, Name: "other", Role: termdv1.Role_ROLE_AGENT}
	s1, s2, so := r.session(t, agent), r.session(t, agent), r.session(t, other)
	for range 3 { // finished ones do not count
		if st, err := r.run(t, agent, r.plan(t, agent, s1, "true")); err != nil || st != termdv1.PlanState_PLAN_STATE_SUCCEEDED {
			t.Fatalf("true: %v %v", st, err)
		}
	}
	a, err := r.Execute(ctx, agent, r.plan(t, agent, s1, "sleep", "30").Id, s1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Execute(ctx, agent, r.plan(t, agent, s2, "sleep", "30").Id, s2)
	if err != nil {
		t.Fatal(err)
	}
	third := r.plan(t, agent, s2, "sleep", "30")
	_, err = r.Execute(ctx, agent, third.Id, s2)
	wantErr(t, err, errdefs.KindExhausted, "already has 2 commands running", "max_running")
	if st := r.state(t, third.Id); st != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Errorf("the refused plan is %s, want still planned", st)
	}
	if _, err := r.Execute(ctx, other, r.plan(t, other, so, "sleep", "30").Id, so); err != nil {
		t.Errorf("another principal's start: %v", err)
	}
	if _, err := r.CancelExecution(ctx, agent, a.Id); err != nil {
		t.Fatal(err)
	}
	waitDone(t, r, a.Id)
	c, err := r.Execute(ctx, agent, third.Id, s2)
	if err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
	for _, id := range []string{b.Id, c.Id} {
		if _, err := r.CancelExecution(ctx, agent, id); err != nil {
			t.Fatal(err)
		}
	}
}

// waitDone waits for an execution's end (its receipt).
func waitDone(t *testing.T, r *rig, id string) {
	t.Helper()
	r.mu.Lock()
	e := r.execs[id]
	r.mu.Unlock()
	if e != nil {
		<-e.done
	}
}
