package broker

import (
	"context"
	"slices"
	"time"

	"github.com/termd/termd/daemon/broker/sessions"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// session is one principal's working context (daemon/broker/sessions),
// holding the executions of it still running. Guarded by Broker.mu, as is
// the registry of them (Broker.sessions).
type session = sessions.Session[*execRec]

// ExecID and Started are what a session knows of an execution it runs.
func (e *execRec) ExecID() string     { return e.id }
func (e *execRec) Started() time.Time { return e.e.GetStartedAt().AsTime() }

// sessionProto is a session's API form.
func (b *Broker) sessionProto(s *session) *termdv1.Session {
	return s.Proto(b.Bus.LastSeq(s.ID), b.Config().Sessions.IdleTimeout.D())
}

// CreateSession opens a session owned by the caller, within the caps.
func (b *Broker) CreateSession(_ context.Context, caller *termdv1.Principal, label string) (*termdv1.Session, error) {
	b.mu.Lock()
	defer b.unlock()
	s, err := b.newSessionLocked(caller, label)
	if err != nil {
		return nil, err
	}
	return b.sessionProto(s), nil
}

// newSessionLocked opens a session (sessions.Registry.New), first closing
// the idle session that makes room for it at the per-principal cap.
func (b *Broker) newSessionLocked(caller *termdv1.Principal, label string) (*session, error) {
	if b.closing {
		return nil, errdefs.Unavailable("termd is shutting down; try again after it restarts")
	}
	cfg := b.Config()
	s, reap, err := b.sessions.New(caller, label, b.Now(), sessions.Caps{PerPrincipal: cfg.Sessions.PerPrincipal, Global: cfg.Sessions.Global}, b.planState)
	if reap != nil {
		b.closeSessionLocked(reap, sessions.ReapReason)
	}
	if err != nil {
		return nil, err
	}
	if err := b.journalSessionLocked(s); err != nil {
		delete(b.sessions, s.ID)
		return nil, err
	}
	b.Bus.Publish(s.ID, termdv1.EventKind_EVENT_KIND_SESSION_CREATED, func(e *termdv1.Event) {
		e.Payload = &termdv1.Event_Session{Session: b.sessionProto(s)}
	})
	return s, nil
}

// planState is the state of a plan the broker holds, for the reap decision.
func (b *Broker) planState(id string) (domain.PlanState, bool) {
	p, ok := b.plans[id]
	if !ok {
		return 0, false
	}
	return p.state(), true
}

// checkSession says whether the caller may see a session ("" = none named).
func (b *Broker) checkSession(caller *termdv1.Principal, id string) error {
	if id == "" {
		return nil
	}
	b.mu.Lock()
	defer b.unlock()
	_, err := b.sessions.Get(caller, id)
	return err
}

// sessionLocked finds a session the caller may see; another agent's session is not found.
func (b *Broker) sessionLocked(caller *termdv1.Principal, id string) (*session, error) {
	return b.sessions.Get(caller, id)
}

// GetSession returns a session the caller may see.
func (b *Broker) GetSession(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Session, error) {
	b.mu.Lock()
	defer b.unlock()
	s, err := b.sessions.Get(caller, id)
	if err != nil {
		return nil, err
	}
	return b.sessionProto(s), nil
}

// ListSessions lists the sessions the caller may see, newest first.
func (b *Broker) ListSessions(_ context.Context, caller *termdv1.Principal, includeClosed bool) []*termdv1.Session {
	b.mu.Lock()
	defer b.unlock()
	out := b.sessions.List(caller, includeClosed)
	res := make([]*termdv1.Session, len(out))
	for i, s := range out {
		res[i] = b.sessionProto(s)
	}
	return res
}

// CloseSession ends a session: its execution is cancelled (with a receipt)
// and its event streams end.
func (b *Broker) CloseSession(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Session, error) {
	b.mu.Lock()
	s, err := b.sessions.Closable(caller, id)
	if err != nil {
		b.unlock()
		return nil, err
	}
	wait := b.closeSessionLocked(s, "session closed by "+caller.Name)
	out := b.sessionProto(s)
	b.unlock()
	if wait != nil {
		<-wait
	}
	return out, nil
}

// closeSessionLocked marks the session closed and cancels its executions. The
// returned channel closes when their receipts are written.
func (b *Broker) closeSessionLocked(s *session, why string) <-chan struct{} {
	if s.Closed {
		return nil
	}
	s.Closed = true
	_ = b.journalSessionLocked(s)
	// Its open plans expire (each with its receipt) and its plans are
	// forgotten: closing a session frees what it held. Running ones go
	// when they finish.
	b.expireOpenPlansLocked(s, "its session was closed ("+why+")")
	for _, id := range slices.Clone(s.Plans) {
		if p, ok := b.plans[id]; ok && p.settled {
			b.forgetPlanLocked(p)
		}
	}
	if !s.Busy() {
		b.publishSessionClosed(s)
		return nil
	}
	var dones []chan struct{}
	for _, e := range s.Running {
		e.stopReason = why
		e.closeSessionAfter = true // the last one to finish ends the session's streams
		dones = append(dones, e.done)
		if e.proc != nil {
			_ = e.proc.Cancel()
		}
	}
	return sessions.AllDone(dones)
}

func (b *Broker) publishSessionClosed(s *session) {
	b.Bus.Publish(s.ID, termdv1.EventKind_EVENT_KIND_SESSION_CLOSED, func(e *termdv1.Event) {
		e.Payload = &termdv1.Event_Session{Session: b.sessionProto(s)}
	})
	b.Bus.CloseSession(s.ID)
	b.forgetAdvice(s.ID)
}

// expire closes idle sessions and expires stale approvals.
func (b *Broker) expire() {
	now := b.Now()
	idle := b.Config().Sessions.IdleTimeout.D()
	b.mu.Lock()
	defer b.unlock()
	for _, s := range b.sessions.Idle(now, idle) {
		b.Log.Info("session expired", "session", s.ID, "owner", s.Owner.Name)
		b.closeSessionLocked(s, "session expired after "+idle.String()+" without activity")
	}
	for _, p := range b.plans {
		if p.state().IsOpen() && p.p.ExpiresAt != nil && now.After(p.p.ExpiresAt.AsTime()) {
			b.expirePlanLocked(p)
		}
	}
}
