package sessions

import (
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// run is an execution as a session holds it: an id and a start time.
type run struct {
	id    string
	start time.Time
}

func (r *run) ExecID() string     { return r.id }
func (r *run) Started() time.Time { return r.start }

var (
	t0       = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	agent    = &termdv1.Principal{Uid: 1000, Gid: 1000, Name: "agent", Role: termdv1.Role_ROLE_AGENT}
	other    = &termdv1.Principal{Uid: 1001, Gid: 1001, Name: "other", Role: termdv1.Role_ROLE_AGENT}
	operator = &termdv1.Principal{Uid: 0, Name: "root", Role: termdv1.Role_ROLE_OPERATOR}
	viewer   = &termdv1.Principal{Uid: 1002, Name: "viewer", Role: termdv1.Role_ROLE_VIEWER}
)

// plans are plan states by id, as the broker holds them.
type plans map[string]domain.PlanState

func (p plans) state(id string) (domain.PlanState, bool) { st, ok := p[id]; return st, ok }

func wantKind(t *testing.T, err error, kind errdefs.Kind, words ...string) {
	t.Helper()
	if err == nil || errdefs.KindOf(err) != kind {
		t.Fatalf("error %v, want kind %v", err, kind)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// The running set keeps the most recently started execution as the
// session's active one, also when that one ends first.
func TestRunningKeepsTheLatest(t *testing.T) {
	s := &Session[*run]{ID: "s", Owner: agent}
	a, b, c := &run{"a", t0}, &run{"b", t0.Add(2 * time.Second)}, &run{"c", t0.Add(time.Second)}
	for _, e := range []*run{a, b, c} {
		s.AddRunning(e)
	}
	if s.Latest != c || !s.Busy() {
		t.Fatalf("latest %v busy %v: the last added is the active one", s.Latest, s.Busy())
	}
	s.DropRunning(c)
	if s.Latest != b {
		t.Fatalf("after c ends the latest started (b) is active, got %v", s.Latest)
	}
	s.DropRunning(a)
	if got := s.Proto(7, time.Minute).ActiveExecutionId; got != "b" {
		t.Fatalf("active execution %q, want b", got)
	}
	s.DropRunning(b)
	if s.Latest != nil || s.Busy() || s.Proto(7, time.Minute).ActiveExecutionId != "" {
		t.Fatalf("nothing runs: latest %v busy %v", s.Latest, s.Busy())
	}
}

// A session's API form: the owner is a copy, an open session expires its
// idle timeout after its last activity, a closed one never.
func TestProto(t *testing.T) {
	s := &Session[*run]{ID: "s", Owner: agent, Label: "work", Created: t0, LastActive: t0.Add(time.Minute), Plans: []string{"p1", "p2"}}
	ps := s.Proto(42, time.Hour)
	if ps.Id != "s" || ps.Label != "work" || ps.PlanCount != 2 || ps.LastSeq != 42 || ps.Closed {
		t.Fatalf("proto %v", ps)
	}
	if !ps.ExpiresAt.AsTime().Equal(t0.Add(time.Minute + time.Hour)) {
		t.Errorf("expires at %v, want an hour after the last activity", ps.ExpiresAt.AsTime())
	}
	ps.Owner.Name = "changed"
	if agent.Name != "agent" {
		t.Fatal("the proto shares the owner")
	}
	s.Closed = true
	if ps = s.Proto(42, time.Hour); ps.ExpiresAt != nil || !ps.Closed {
		t.Errorf("a closed session: %v", ps)
	}
	r := Restore[*run](ps, t0.Add(time.Hour))
	if r.ID != "s" || !r.Closed || !r.LastActive.Equal(t0.Add(time.Hour)) || !r.Created.Equal(t0) || r.Label != "work" {
		t.Errorf("restored %+v", r)
	}
}

// A session holds work while it has a plan awaiting approval or approved,
// an allowed plan planned within ReapGrace, or is new and empty within
// NewGrace; finished and forgotten plans hold nothing.
func TestHoldsWork(t *testing.T) {
	st := plans{"wait": domain.PlanAwaitingApproval, "ok": domain.PlanApproved, "planned": domain.PlanPlanned, "done": domain.PlanSucceeded}
	for _, c := range []struct {
		plans []string
		age   time.Duration // since created and last active
		want  bool
	}{
		{nil, NewGrace - time.Second, true},
		{nil, NewGrace + time.Second, false},
		{[]string{"done"}, time.Second, false},
		{[]string{"gone"}, time.Second, false},
		{[]string{"wait"}, time.Hour, true},
		{[]string{"done", "ok"}, time.Hour, true},
		{[]string{"planned"}, ReapGrace - time.Second, true},
		{[]string{"planned"}, ReapGrace + time.Second, false},
	} {
		s := &Session[*run]{Owner: agent, Plans: c.plans, Created: t0, LastActive: t0}
		if got := s.HoldsWork(t0.Add(c.age), st.state); got != c.want {
			t.Errorf("plans %v after %v: holds work %v, want %v", c.plans, c.age, got, c.want)
		}
	}
}
