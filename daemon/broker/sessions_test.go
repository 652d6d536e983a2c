package broker

import (
	"context"
	"testing"
	"time"

	"github.com/termd/termd/daemon/broker/sessions"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// At the per-principal session cap, a new session takes the place of the
// principal's least recently active idle one (what clients that run a
// process per MCP call leave behind), never of one holding a plan awaiting
// approval, an approved plan, a fresh allowed plan, a running command or a
// session just created.
func TestSessionCapReapsOnlyIdleSessions(t *testing.T) {
	r := newRig(t)
	r.Config().Sessions.PerPrincipal = 3
	ctx := context.Background()

	waiting := r.session(t, agent)
	p, err := r.CreatePlan(ctx, agent, waiting, &termdv1.CommandRequest{Argv: []string{"touch", "x"}, Cwd: r.ws, Mode: termdv1.Mode_MODE_CONFIRM})
	if err != nil || p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("touch in confirm mode should await approval: %v %v", p.GetState(), err)
	}
	done := r.session(t, agent)
	if st, err := r.run(t, agent, r.plan(t, agent, done, "true")); err != nil || st != termdv1.PlanState_PLAN_STATE_SUCCEEDED {
		t.Fatalf("run true: %v %v", st, err)
	}
	fresh := r.session(t, agent)
	r.plan(t, agent, fresh, "echo", "later") // allowed, not yet executed

	r.clock.Advance(sessions.NewGrace + time.Second)
	fourth := r.session(t, agent) // takes the executed-only session's place
	closed := map[string]bool{}
	for _, s := range r.ListSessions(ctx, agent, true) {
		closed[s.Id] = s.Closed
	}
	if !closed[done] || closed[waiting] || closed[fresh] || closed[fourth] {
		t.Fatalf("only the idle session should have been closed: %v (idle %s)", closed, done)
	}
	// Now every session holds something, or is new: the cap holds.
	_, err = r.CreateSession(ctx, agent, "test")
	wantErr(t, err, errdefs.KindExhausted, "sessions.per_principal")

	// An allowed plan left unexecuted for longer than sessions.ReapGrace, and a
	// session left empty, no longer hold their place.
	r.clock.Advance(sessions.ReapGrace + time.Second)
	if _, err := r.CreateSession(ctx, agent, "test"); err != nil {
		t.Fatalf("a stale idle session should make room: %v", err)
	}
	if _, err := r.CreateSession(ctx, agent, "test"); err != nil {
		t.Fatalf("a second stale idle session should make room: %v", err)
	}
	_, err = r.CreateSession(ctx, agent, "test")
	wantErr(t, err, errdefs.KindExhausted, "sessions.per_principal")
	if s, _ := r.GetSession(ctx, agent, waiting); s.GetClosed() {
		t.Fatal("the session with a plan awaiting approval was closed")
	}
}
