package sessions

import (
	"sort"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Exec is what a session knows of an execution it runs: the broker's
// execution record.
type Exec interface {
	comparable
	ExecID() string
	Started() time.Time
}

// Session is one principal's working context. Guarded by the broker's mutex.
type Session[E Exec] struct {
	ID         string
	Owner      *termdv1.Principal
	Label      string
	Created    time.Time
	LastActive time.Time
	Closed     bool
	Plans      []string
	// Running holds the session's executions that have not finished; a
	// session runs several at once (two terminals of one user share it),
	// bounded per principal by sessions.max_running.
	Running map[string]E
	// Latest is the most recently started of them, shown as the session's
	// active execution (the zero E when none runs).
	Latest E
	// Open counts its open plans (sessions.max_plans; the broker's planbounds.go).
	Open int
	// JBytes is the size of its current journal record (journal.fmu).
	JBytes int64
}

// Busy reports whether a command of the session is still running.
func (s *Session[E]) Busy() bool { return len(s.Running) > 0 }

// AddRunning and DropRunning keep the running set and Latest in step.
func (s *Session[E]) AddRunning(e E) {
	if s.Running == nil {
		s.Running = map[string]E{}
	}
	s.Running[e.ExecID()] = e
	s.Latest = e
}

func (s *Session[E]) DropRunning(e E) {
	delete(s.Running, e.ExecID())
	var none E
	if s.Latest == e {
		s.Latest = none
		for _, o := range s.Running {
			if s.Latest == none || o.Started().After(s.Latest.Started()) {
				s.Latest = o
			}
		}
	}
}

// Touch records activity in the session (the idle timeout starts again).
func (s *Session[E]) Touch(now time.Time) { s.LastActive = now }

// Proto is the session's API form: lastSeq is its last event's seq on the
// bus, idle the idle timeout (sessions.idle_timeout) an open session
// expires after.
func (s *Session[E]) Proto(lastSeq uint64, idle time.Duration) *termdv1.Session {
	ps := &termdv1.Session{
		Id:           s.ID,
		Owner:        proto.Clone(s.Owner).(*termdv1.Principal),
		CreatedAt:    timestamppb.New(s.Created),
		LastActiveAt: timestamppb.New(s.LastActive),
		Closed:       s.Closed,
		PlanCount:    int32(len(s.Plans)),
		Label:        s.Label,
		LastSeq:      lastSeq,
	}
	if !s.Closed {
		ps.ExpiresAt = timestamppb.New(s.LastActive.Add(idle))
	}
	var none E
	if s.Latest != none {
		ps.ActiveExecutionId = s.Latest.ExecID()
	}
	return ps
}

// Restore is a session as its journal record ps has it, active now.
func Restore[E Exec](ps *termdv1.Session, now time.Time) *Session[E] {
	return &Session[E]{ID: ps.Id, Owner: ps.Owner, Label: ps.Label, Created: ps.CreatedAt.AsTime(), LastActive: now, Closed: ps.Closed}
}

// Registry is the broker's sessions by id. Guarded by the broker's mutex.
type Registry[E Exec] map[string]*Session[E]

// Caps are the session caps of the configuration (sessions.*).
type Caps struct {
	PerPrincipal, Global int
}

// ReapReason is why a session closed to make room (Registry.New).
const ReapReason = "closed to make room under sessions.per_principal: idle, nothing pending"

// New opens a session owned by caller within the caps and adds it. When
// the caller is at its per-principal cap, the least recently active of its
// sessions that holds no work (Reapable) makes room: it is returned as
// reap, still open, for the broker to close with ReapReason before it
// records the new session, also when err says a cap still holds.
func (r Registry[E]) New(caller *termdv1.Principal, label string, now time.Time, caps Caps, state PlanStates) (s, reap *Session[E], err error) {
	if len(label) > 200 {
		return nil, nil, errdefs.Invalid("session label is %d bytes; keep it under 200", len(label))
	}
	total, mine := 0, 0
	key := domain.PrincipalKey(caller)
	for _, s := range r {
		if s.Closed {
			continue
		}
		total++
		if domain.PrincipalKey(s.Owner) == key {
			mine++
		}
	}
	if mine >= caps.PerPrincipal {
		if reap = r.Reapable(key, now, state); reap != nil {
			mine--
			total--
		}
	}
	if mine >= caps.PerPrincipal {
		return nil, reap, errdefs.Exhausted("you already have %d open sessions (the per-principal cap, sessions.per_principal); close one with `termctl sessions close ID` or reuse it", mine)
	}
	if total >= caps.Global {
		return nil, reap, errdefs.Exhausted("termd has %d open sessions (the global cap, sessions.global); close idle sessions with `termctl sessions close ID`", total)
	}
	s = &Session[E]{ID: uuid.NewString(), Owner: proto.Clone(caller).(*termdv1.Principal), Label: label, Created: now, LastActive: now}
	r[s.ID] = s
	return s, reap, nil
}

// ReapGrace is how long a session holding only allowed, unexecuted plans
// is kept at the per-principal cap: a client that runs one process per
// call (the Inspector CLI) plans in one process and executes in the next.
// A new, still empty session is kept for NewGrace: its client is about to
// plan in it.
const (
	ReapGrace = time.Minute
	NewGrace  = 10 * time.Second
)

// PlanStates says the state of a plan the broker holds (false: none).
type PlanStates func(planID string) (domain.PlanState, bool)

// Reapable is the session that makes room under the per-principal cap for
// the principal key: its least recently active open session that holds
// nothing a person or agent is waiting on (HoldsWork) and runs nothing;
// nil when there is none. Bridges whose clients went away (a process per
// MCP call) leave such sessions behind; without this the ninth call
// failed with the cap.
func (r Registry[E]) Reapable(key string, now time.Time, state PlanStates) *Session[E] {
	var lru *Session[E]
	for _, s := range r {
		if s.Closed || s.Busy() || domain.PrincipalKey(s.Owner) != key || s.HoldsWork(now, state) {
			continue
		}
		if lru == nil || s.LastActive.Before(lru.LastActive) {
			lru = s
		}
	}
	return lru
}

// HoldsWork reports whether the session holds a plan awaiting approval or
// approved, an allowed plan planned in the last ReapGrace, or is new (in
// its first NewGrace) without a plan yet.
func (s *Session[E]) HoldsWork(now time.Time, state PlanStates) bool {
	if len(s.Plans) == 0 && now.Sub(s.Created) < NewGrace {
		return true
	}
	for _, id := range s.Plans {
		st, ok := state(id)
		if !ok {
			continue
		}
		switch st {
		case domain.PlanAwaitingApproval, domain.PlanApproved:
			return true
		case domain.PlanPlanned:
			if now.Sub(s.LastActive) < ReapGrace {
				return true
			}
		}
	}
	return false
}

// Get finds a session the caller may see; another agent's session is not found.
func (r Registry[E]) Get(caller *termdv1.Principal, id string) (*Session[E], error) {
	if id == "" {
		return nil, errdefs.Invalid("session_id is empty; pass a session id (see `termctl sessions list`)")
	}
	s, ok := r[id]
	if !ok || !domain.Visible(caller, s.Owner) {
		return nil, errdefs.NotFound("session %s not found (see `termctl sessions list`)", id)
	}
	return s, nil
}

// Closable finds a session the caller may close: its own, or any as an operator.
func (r Registry[E]) Closable(caller *termdv1.Principal, id string) (*Session[E], error) {
	s, err := r.Get(caller, id)
	if err == nil && !domain.OwnerOrOperator(caller, s.Owner) {
		err = errdefs.Permission("session %s belongs to %s; only its owner or an operator may close it", id, s.Owner.Name)
	}
	return s, err
}

// OpenVisible counts the open sessions the caller may see.
func (r Registry[E]) OpenVisible(caller *termdv1.Principal) int32 {
	n := int32(0)
	for _, s := range r {
		if !s.Closed && domain.Visible(caller, s.Owner) {
			n++
		}
	}
	return n
}

// Visible reports whether the session id exists and the caller may see it.
func (r Registry[E]) Visible(caller *termdv1.Principal, id string) bool {
	s, ok := r[id]
	return ok && domain.Visible(caller, s.Owner)
}

// List is the sessions the caller may see, newest first; closed ones only
// with includeClosed.
func (r Registry[E]) List(caller *termdv1.Principal, includeClosed bool) []*Session[E] {
	var out []*Session[E]
	for _, s := range r {
		if (includeClosed || !s.Closed) && domain.Visible(caller, s.Owner) {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out
}

// Plannable finds the session id for a new plan of the caller: one it may
// see, open, and its own (or any, for an operator).
func (r Registry[E]) Plannable(caller *termdv1.Principal, id string) (*Session[E], error) {
	s, err := r.Get(caller, id)
	if err != nil {
		return nil, err
	}
	if s.Closed {
		return nil, errdefs.Precondition("session %s is closed; plan in an open session (omit session_id to use your latest)", id)
	}
	if !domain.OwnerOrOperator(caller, s.Owner) {
		return nil, errdefs.Permission("session %s belongs to %s; plan in your own session", id, s.Owner.Name)
	}
	return s, nil
}

// ForPlan is the session a new plan of the caller goes into when it names
// none: its most recently active open session with fewer than maxPlans
// open plans; nil when there is none (the broker opens one).
func (r Registry[E]) ForPlan(caller *termdv1.Principal, maxPlans int) *Session[E] {
	var latest *Session[E]
	key := domain.PrincipalKey(caller)
	for _, s := range r {
		if !s.Closed && domain.PrincipalKey(s.Owner) == key && s.Open < maxPlans && (latest == nil || s.LastActive.After(latest.LastActive)) {
			latest = s
		}
	}
	return latest
}

// Idle is the open sessions the idle timeout expires at now: none of their
// commands runs (a running command keeps its session alive) and they saw
// no activity for longer than idle.
func (r Registry[E]) Idle(now time.Time, idle time.Duration) []*Session[E] {
	var out []*Session[E]
	for _, s := range r {
		if !s.Closed && !s.Busy() && now.Sub(s.LastActive) > idle {
			out = append(out, s)
		}
	}
	return out
}

// ByCreation is every session, oldest first (by id when made at the same
// time): the order of the journal's session records.
func (r Registry[E]) ByCreation() []*Session[E] {
	ss := make([]*Session[E], 0, len(r))
	for _, s := range r {
		ss = append(ss, s)
	}
	sort.Slice(ss, func(i, k int) bool {
		if !ss[i].Created.Equal(ss[k].Created) {
			return ss[i].Created.Before(ss[k].Created)
		}
		return ss[i].ID < ss[k].ID
	})
	return ss
}

// AllDone is a channel that closes once every one of dones has closed:
// when the receipts of a closed session's executions are written.
func AllDone(dones []chan struct{}) <-chan struct{} {
	wait := make(chan struct{})
	go func() {
		for _, d := range dones {
			<-d
		}
		close(wait)
	}()
	return wait
}
