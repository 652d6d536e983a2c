package broker

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// session is one principal's working context. Guarded by Broker.mu.
type session struct {
	id         string
	owner      *termdv1.Principal
	label      string
	created    time.Time
	lastActive time.Time
	closed     bool
	plans      []string
	// running holds the session's executions that have not finished; a
	// session runs several at once (two terminals of one user share it),
	// bounded per principal by sessions.max_running.
	running map[string]*execRec
	// latest is the most recently started of them, shown as the session's
	// active execution.
	latest *execRec
	// open counts its open plans (sessions.max_plans; planbounds.go).
	open int
	// jbytes is the size of its current journal record (journal.fmu).
	jbytes int64
}

// busy reports whether a command of the session is still running.
func (s *session) busy() bool { return len(s.running) > 0 }

// addRunning and dropRunning keep the running set and latest in step.
func (s *session) addRunning(e *execRec) {
	if s.running == nil {
		s.running = map[string]*execRec{}
	}
	s.running[e.id] = e
	s.latest = e
}

func (s *session) dropRunning(e *execRec) {
	delete(s.running, e.id)
	if s.latest == e {
		s.latest = nil
		for _, o := range s.running {
			if s.latest == nil || o.e.GetStartedAt().AsTime().After(s.latest.e.GetStartedAt().AsTime()) {
				s.latest = o
			}
		}
	}
}

func (s *session) proto(b *Broker) *termdv1.Session {
	ps := &termdv1.Session{
		Id:           s.id,
		Owner:        proto.Clone(s.owner).(*termdv1.Principal),
		CreatedAt:    timestamppb.New(s.created),
		LastActiveAt: timestamppb.New(s.lastActive),
		Closed:       s.closed,
		PlanCount:    int32(len(s.plans)),
		Label:        s.label,
		LastSeq:      b.Bus.LastSeq(s.id),
	}
	if !s.closed {
		ps.ExpiresAt = timestamppb.New(s.lastActive.Add(b.Config().Sessions.IdleTimeout.D()))
	}
	if s.latest != nil {
		ps.ActiveExecutionId = s.latest.id
	}
	return ps
}

func (s *session) touch(now time.Time) { s.lastActive = now }

// CreateSession opens a session owned by the caller, within the caps.
func (b *Broker) CreateSession(_ context.Context, caller *termdv1.Principal, label string) (*termdv1.Session, error) {
	b.mu.Lock()
	defer b.unlock()
	s, err := b.newSessionLocked(caller, label)
	if err != nil {
		return nil, err
	}
	return s.proto(b), nil
}

func (b *Broker) newSessionLocked(caller *termdv1.Principal, label string) (*session, error) {
	if b.closing {
		return nil, errdefs.Unavailable("termd is shutting down; try again after it restarts")
	}
	if len(label) > 200 {
		return nil, errdefs.Invalid("session label is %d bytes; keep it under 200", len(label))
	}
	cfg := b.Config()
	total, mine := 0, 0
	key := domain.PrincipalKey(caller)
	for _, s := range b.sessions {
		if s.closed {
			continue
		}
		total++
		if domain.PrincipalKey(s.owner) == key {
			mine++
		}
	}
	if mine >= cfg.Sessions.PerPrincipal && b.reapIdleLocked(key) {
		mine--
		total--
	}
	if mine >= cfg.Sessions.PerPrincipal {
		return nil, errdefs.Exhausted("you already have %d open sessions (the per-principal cap, sessions.per_principal); close one with `termctl sessions close ID` or reuse it", mine)
	}
	if total >= cfg.Sessions.Global {
		return nil, errdefs.Exhausted("termd has %d open sessions (the global cap, sessions.global); close idle sessions with `termctl sessions close ID`", total)
	}
	now := b.Now()
	s := &session{id: uuid.NewString(), owner: proto.Clone(caller).(*termdv1.Principal), label: label, created: now, lastActive: now}
	b.sessions[s.id] = s
	if err := b.journalSessionLocked(s); err != nil {
		delete(b.sessions, s.id)
		return nil, err
	}
	b.Bus.Publish(s.id, termdv1.EventKind_EVENT_KIND_SESSION_CREATED, func(e *termdv1.Event) {
		e.Payload = &termdv1.Event_Session{Session: s.proto(b)}
	})
	return s, nil
}

// reapGrace is how long a session holding only allowed, unexecuted plans
// is kept at the per-principal cap: a client that runs one process per
// call (the Inspector CLI) plans in one process and executes in the next.
// A new, still empty session is kept for newGrace: its client is about to
// plan in it.
const (
	reapGrace = time.Minute
	newGrace  = 10 * time.Second
)

// reapIdleLocked makes room under the per-principal cap by closing the
// principal's least recently active session that holds nothing a person
// or agent is waiting on: no running command, no plan awaiting approval or
// approved, no allowed plan planned in the last reapGrace, and not created
// in the last newGrace without a plan yet. Bridges
// whose clients went away (a process per MCP call) leave such sessions
// behind; without this the ninth call failed with the cap.
func (b *Broker) reapIdleLocked(key string) bool {
	now := b.Now()
	var lru *session
	for _, s := range b.sessions {
		if s.closed || s.busy() || domain.PrincipalKey(s.owner) != key || b.holdsWorkLocked(s, now) {
			continue
		}
		if lru == nil || s.lastActive.Before(lru.lastActive) {
			lru = s
		}
	}
	if lru == nil {
		return false
	}
	b.closeSessionLocked(lru, "closed to make room under sessions.per_principal: idle, nothing pending")
	return true
}

func (b *Broker) holdsWorkLocked(s *session, now time.Time) bool {
	if len(s.plans) == 0 && now.Sub(s.created) < newGrace {
		return true
	}
	for _, id := range s.plans {
		rec, ok := b.plans[id]
		if !ok {
			continue
		}
		switch rec.state() {
		case domain.PlanAwaitingApproval, domain.PlanApproved:
			return true
		case domain.PlanPlanned:
			if now.Sub(s.lastActive) < reapGrace {
				return true
			}
		}
	}
	return false
}

// checkSession says whether the caller may see a session ("" = none named).
func (b *Broker) checkSession(caller *termdv1.Principal, id string) error {
	if id == "" {
		return nil
	}
	b.mu.Lock()
	defer b.unlock()
	_, err := b.sessionLocked(caller, id)
	return err
}

// sessionLocked finds a session the caller may see; another agent's session is not found.
func (b *Broker) sessionLocked(caller *termdv1.Principal, id string) (*session, error) {
	if id == "" {
		return nil, errdefs.Invalid("session_id is empty; pass a session id (see `termctl sessions list`)")
	}
	s, ok := b.sessions[id]
	if !ok || !domain.Visible(caller, s.owner) {
		return nil, errdefs.NotFound("session %s not found (see `termctl sessions list`)", id)
	}
	return s, nil
}

// GetSession returns a session the caller may see.
func (b *Broker) GetSession(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Session, error) {
	b.mu.Lock()
	defer b.unlock()
	s, err := b.sessionLocked(caller, id)
	if err != nil {
		return nil, err
	}
	return s.proto(b), nil
}

// ListSessions lists the sessions the caller may see, newest first.
func (b *Broker) ListSessions(_ context.Context, caller *termdv1.Principal, includeClosed bool) []*termdv1.Session {
	b.mu.Lock()
	defer b.unlock()
	var out []*session
	for _, s := range b.sessions {
		if (includeClosed || !s.closed) && domain.Visible(caller, s.owner) {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].created.After(out[j].created) })
	res := make([]*termdv1.Session, len(out))
	for i, s := range out {
		res[i] = s.proto(b)
	}
	return res
}

// CloseSession ends a session: its execution is cancelled (with a receipt)
// and its event streams end.
func (b *Broker) CloseSession(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Session, error) {
	b.mu.Lock()
	s, err := b.sessionLocked(caller, id)
	if err == nil && !domain.OwnerOrOperator(caller, s.owner) {
		err = errdefs.Permission("session %s belongs to %s; only its owner or an operator may close it", id, s.owner.Name)
	}
	if err != nil {
		b.unlock()
		return nil, err
	}
	wait := b.closeSessionLocked(s, "session closed by "+caller.Name)
	out := s.proto(b)
	b.unlock()
	if wait != nil {
		<-wait
	}
	return out, nil
}

// closeSessionLocked marks the session closed and cancels its executions. The
// returned channel closes when their receipts are written.
func (b *Broker) closeSessionLocked(s *session, why string) <-chan struct{} {
	if s.closed {
		return nil
	}
	s.closed = true
	_ = b.journalSessionLocked(s)
	// Its open plans expire (each with its receipt) and its plans are
	// forgotten: closing a session frees what it held. Running ones go
	// when they finish.
	b.expireOpenPlansLocked(s, "its session was closed ("+why+")")
	for _, id := range slices.Clone(s.plans) {
		if p, ok := b.plans[id]; ok && p.settled {
			b.forgetPlanLocked(p)
		}
	}
	if !s.busy() {
		b.publishSessionClosed(s)
		return nil
	}
	var dones []chan struct{}
	for _, e := range s.running {
		e.stopReason = why
		e.closeSessionAfter = true // the last one to finish ends the session's streams
		dones = append(dones, e.done)
		if e.proc != nil {
			_ = e.proc.Cancel()
		}
	}
	wait := make(chan struct{})
	go func() {
		for _, d := range dones {
			<-d
		}
		close(wait)
	}()
	return wait
}

func (b *Broker) publishSessionClosed(s *session) {
	b.Bus.Publish(s.id, termdv1.EventKind_EVENT_KIND_SESSION_CLOSED, func(e *termdv1.Event) {
		e.Payload = &termdv1.Event_Session{Session: s.proto(b)}
	})
	b.Bus.CloseSession(s.id)
	b.forgetAdvice(s.id)
}

// expire closes idle sessions and expires stale approvals.
func (b *Broker) expire() {
	now := b.Now()
	idle := b.Config().Sessions.IdleTimeout.D()
	b.mu.Lock()
	defer b.unlock()
	for _, s := range b.sessions {
		if s.closed {
			continue
		}
		if s.busy() {
			continue // a running command keeps its session alive
		}
		if now.Sub(s.lastActive) > idle {
			b.Log.Info("session expired", "session", s.id, "owner", s.owner.Name)
			b.closeSessionLocked(s, "session expired after "+idle.String()+" without activity")
		}
	}
	for _, p := range b.plans {
		if p.state().IsOpen() && p.p.ExpiresAt != nil && now.After(p.p.ExpiresAt.AsTime()) {
			b.expirePlanLocked(p)
		}
	}
}
