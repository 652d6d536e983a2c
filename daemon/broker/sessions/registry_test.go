package sessions

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// At the per-principal cap New names the least recently active idle
// session of the caller to close, never a busy one, one holding work or
// another principal's; the global cap holds after the reap too.
func TestNewReapsTheLeastRecentIdle(t *testing.T) {
	r := Registry[*run]{}
	st := plans{"wait": domain.PlanAwaitingApproval}
	caps := Caps{PerPrincipal: 3, Global: 5}
	mk := func(who string, at time.Time) *Session[*run] {
		owner := agent
		if who == "other" {
			owner = other
		}
		s, reap, err := r.New(owner, who, at, caps, st.state)
		if err != nil || reap != nil {
			t.Fatalf("new session at %v: reap %v, %v", at, reap, err)
		}
		return s
	}
	busy, waiting, idle := mk("busy", t0), mk("waiting", t0.Add(time.Second)), mk("idle", t0.Add(2*time.Second))
	busy.AddRunning(&run{"x", t0})
	waiting.Plans = []string{"wait"}
	mk("other", t0)
	now := t0.Add(time.Minute)
	s, reap, err := r.New(agent, "fourth", now, caps, st.state)
	if err != nil || reap != idle || s == nil || r[s.ID] != s || s.Label != "fourth" || !s.Created.Equal(now) {
		t.Fatalf("the idle session makes room: reap %v (want %v), %v", reap, idle, err)
	}
	if reap.Closed {
		t.Fatal("New closed the reaped session itself: the broker closes it")
	}
	reap.Closed = true // as the broker does
	if s.Owner == agent || domain.PrincipalKey(s.Owner) != domain.PrincipalKey(agent) {
		t.Error("the owner is not a copy of the caller")
	}
	// Now every session of agent runs, waits or is new.
	_, reap, err = r.New(agent, "", now.Add(time.Second), caps, st.state)
	wantKind(t, err, errdefs.KindExhausted, "3 open sessions", "sessions.per_principal")
	if reap != nil {
		t.Errorf("reaped %v holding work", reap.Label)
	}
	// Past NewGrace the empty fourth makes room, but a reload lowered the
	// global cap below what is open (5, 4 after the reap).
	mk("other", now)
	_, reap, err = r.New(agent, "", now.Add(NewGrace+time.Second), Caps{PerPrincipal: 3, Global: 3}, st.state)
	wantKind(t, err, errdefs.KindExhausted, "termd has 4 open sessions", "sessions.global")
	if reap != s {
		t.Errorf("reap %v, want the empty session past its grace", reap)
	}
	_, _, err = r.New(agent, strings.Repeat("x", 201), now, caps, st.state)
	wantKind(t, err, errdefs.KindInvalid, "201 bytes", "under 200")
}

// What a caller may see, close and plan in: an agent its own sessions, a
// viewer sees all but closes none, an operator everything.
func TestVisibility(t *testing.T) {
	r := Registry[*run]{}
	caps := Caps{PerPrincipal: 9, Global: 9}
	mine, _, _ := r.New(agent, "", t0, caps, plans{}.state)
	theirs, _, _ := r.New(other, "", t0.Add(time.Second), caps, plans{}.state)
	if _, err := r.Get(agent, theirs.ID); err == nil {
		t.Fatal("an agent sees another's session")
	} else {
		wantKind(t, err, errdefs.KindNotFound, theirs.ID, "not found")
	}
	_, err := r.Get(agent, "")
	wantKind(t, err, errdefs.KindInvalid, "session_id is empty")
	if s, err := r.Get(viewer, theirs.ID); err != nil || s != theirs {
		t.Fatalf("a viewer sees every session: %v", err)
	}
	_, err = r.Closable(viewer, theirs.ID)
	wantKind(t, err, errdefs.KindPermission, "belongs to other", "owner or an operator")
	if s, err := r.Closable(operator, theirs.ID); err != nil || s != theirs {
		t.Fatalf("an operator closes any session: %v", err)
	}
	_, err = r.Plannable(operator, mine.ID)
	if err != nil {
		t.Fatalf("an operator plans in any session: %v", err)
	}
	mine.Closed = true
	_, err = r.Plannable(agent, mine.ID)
	wantKind(t, err, errdefs.KindPrecondition, "is closed")
	if !r.Visible(agent, mine.ID) || r.Visible(agent, theirs.ID) || r.Visible(agent, "nope") {
		t.Error("Visible disagrees with Get")
	}
	if n := r.OpenVisible(operator); n != 1 {
		t.Errorf("open sessions an operator sees: %d, want 1", n)
	}
	if l := r.List(agent, false); len(l) != 0 {
		t.Errorf("agent's open sessions: %d, want none", len(l))
	}
	if l := r.List(operator, true); len(l) != 2 || l[0] != theirs {
		t.Errorf("all sessions newest first: %v", l)
	}
}

// A plan without a session goes into the caller's most recently active
// open session with room; the idle timeout expires only open, idle sessions
// running nothing; the journal order is by creation, then id.
func TestForPlanIdleAndOrder(t *testing.T) {
	r := Registry[*run]{}
	add := func(id string, owner *termdv1.Principal, created, active time.Time) *Session[*run] {
		s := &Session[*run]{ID: id, Owner: owner, Created: created, LastActive: active}
		r[id] = s
		return s
	}
	old := add("b-old", agent, t0, t0)
	recent := add("a-recent", agent, t0, t0.Add(time.Hour))
	full := add("full", agent, t0.Add(time.Second), t0.Add(2*time.Hour))
	full.Open = 2
	closed := add("closed", agent, t0.Add(time.Second), t0.Add(3*time.Hour))
	closed.Closed = true
	add("theirs", other, t0.Add(2*time.Second), t0.Add(4*time.Hour))
	if got := r.ForPlan(agent, 2); got != recent {
		t.Errorf("a new plan goes into %v, want the most recent open session with room", got.ID)
	}
	if got := r.ForPlan(agent, 3); got != full {
		t.Errorf("with room for 3 plans: %v, want full", got.ID)
	}
	if got := r.ForPlan(operator, 2); got != nil {
		t.Errorf("an operator's plan goes into another's session %v", got.ID)
	}
	old.AddRunning(&run{"x", t0})
	idle := r.Idle(t0.Add(2*time.Hour+time.Minute), time.Hour)
	if len(idle) != 1 || idle[0] != recent {
		t.Errorf("idle: %v, want only a-recent (b-old runs, full and theirs were active within the hour, closed is closed)", idle)
	}
	var ids []string
	for _, s := range r.ByCreation() {
		ids = append(ids, s.ID)
	}
	if want := []string{"a-recent", "b-old", "closed", "full", "theirs"}; !slices.Equal(ids, want) {
		t.Errorf("journal order %v, want %v", ids, want)
	}
}

// An event stream counts against its principal's sessions.max_streams
// until released.
func TestStreamsCap(t *testing.T) {
	st := Streams{}
	for range 2 {
		if err := st.Acquire("uid:1000", 2); err != nil {
			t.Fatal(err)
		}
	}
	wantKind(t, st.Acquire("uid:1000", 2), errdefs.KindExhausted, "2 event streams open", "sessions.max_streams")
	if err := st.Acquire("uid:1001", 2); err != nil {
		t.Fatalf("another principal has its own count: %v", err)
	}
	st.Release("uid:1000")
	if err := st.Acquire("uid:1000", 2); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	st.Release("uid:1001")
	if _, ok := st["uid:1001"]; ok || len(st) != 1 {
		t.Errorf("a principal without streams is forgotten: %v", st)
	}
}
