package bounds

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/errdefs"
)

// plans is a principal's plans as the broker holds them: the ids still
// kept among its finished plans.
type plans struct {
	u      *Use
	kept   map[string]bool
	forgot []string
}

func (p *plans) Kept(id string) bool { return p.kept[id] }

func (p *plans) Forget(id string) {
	delete(p.kept, id)
	p.forgot = append(p.forgot, id)
	p.u.Unkeep()
}

func finishN(u *Use, p *plans, n int) {
	for i := range n {
		id := fmt.Sprintf("p%d", i)
		u.Finish(id)
		p.kept[id] = true
	}
}

// Past plans.keep_finished the oldest finished plans are forgotten, oldest
// first; the journal bound forgets more while it is passed.
func TestTrimForgetsTheOldestFinished(t *testing.T) {
	u := &Use{}
	p := &plans{u: u, kept: map[string]bool{}}
	finishN(u, p, 5)
	u.Trim(config.Plans{KeepFinished: 2, MaxJournalBytes: 1 << 20}, nil, p)
	if want := []string{"p0", "p1", "p2"}; !slices.Equal(p.forgot, want) {
		t.Fatalf("forgot %q, want %q", p.forgot, want)
	}
	if u.kept != 2 || !slices.Equal(u.finished, []string{"p3", "p4"}) {
		t.Fatalf("kept %d of %q, want 2 of [p3 p4]", u.kept, u.finished)
	}
	journal := int64(300) // each plan 100 bytes of journal
	u.Trim(config.Plans{KeepFinished: 2, MaxJournalBytes: 250}, func() int64 { return journal - int64(len(p.forgot)-3)*100 }, p)
	if want := []string{"p0", "p1", "p2", "p3"}; !slices.Equal(p.forgot, want) {
		t.Fatalf("with the journal bound forgot %q, want %q", p.forgot, want)
	}
}

// Ids of plans forgotten otherwise (their session closed) are skipped, and
// squeezed out before they outnumber the kept.
func TestTrimSkipsAndSqueezesForgottenIds(t *testing.T) {
	u := &Use{}
	p := &plans{u: u, kept: map[string]bool{}}
	finishN(u, p, 100)
	for i := range 98 { // forgotten with their sessions
		id := fmt.Sprintf("p%d", i)
		delete(p.kept, id)
		u.Unkeep()
	}
	u.Trim(config.Plans{KeepFinished: 10, MaxJournalBytes: 1 << 20}, nil, p)
	if len(p.forgot) != 0 {
		t.Errorf("forgot %q within the bounds", p.forgot)
	}
	if !slices.Equal(u.finished, []string{"p98", "p99"}) {
		t.Errorf("finished %q after squeezing, want [p98 p99]", u.finished)
	}
}

// Each refusal is Exhausted and names its limit and what to do.
func TestRoomNamesTheLimit(t *testing.T) {
	lim := config.Plans{MaxOpen: 2, MaxOpenBytes: 1000, MaxJournalBytes: 5000}
	u := &Use{Open: 1, OpenBytes: 900}
	if err := u.Room("alice", lim, 100); err != nil {
		t.Errorf("a plan within the bounds refused: %v", err)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"session", SessionRoom("s1", 3, 3), "sessions.max_plans (3)"},
		{"open bytes", u.Room("alice", lim, 101), "plans.max_open_bytes"},
		{"open", (&Use{Open: 2}).Room("alice", lim, 1), "plans.max_open (2)"},
		{"journal", JournalRoom("alice", 5001, lim), "plans.max_journal_bytes"},
	}
	for _, c := range cases {
		if c.err == nil || errdefs.KindOf(c.err) != errdefs.KindExhausted || !strings.Contains(c.err.Error(), c.want) || !strings.Contains(c.err.Error(), "termctl") {
			t.Errorf("%s: %v, want Exhausted naming %s and what to do", c.name, c.err, c.want)
		}
	}
	if err := SessionRoom("s1", 2, 3); err != nil {
		t.Errorf("a session below its cap refused: %v", err)
	}
	if err := JournalRoom("alice", 5000, lim); err != nil {
		t.Errorf("a journal at its limit refused: %v", err)
	}
}

// PlanRoom checks the session, then the principal's open plans, then,
// with a journal, makes room by forgetting finished plans before it
// refuses the journal's bound; without a journal the journal never counts.
func TestPlanRoom(t *testing.T) {
	lim := config.Plans{MaxOpen: 2, MaxOpenBytes: 1000, KeepFinished: 5, MaxJournalBytes: 250}
	m := Uses{}
	u := m.For("uid:1")
	p := &plans{u: u, kept: map[string]bool{}}
	finishN(u, p, 3)
	u.Journal = 300 // each finished plan 100 bytes
	load := func(n *int64) int64 { return *n - int64(len(p.forgot))*100 }
	ask := Ask{Key: "uid:1", Who: "alice", Session: "s1", SessionOpen: 0, Bytes: 10}
	if err := m.PlanRoom(ask, 3, lim, load, p); err != nil || !slices.Equal(p.forgot, []string{"p0"}) {
		t.Fatalf("room made by forgetting %q: %v", p.forgot, err)
	}
	if err := m.PlanRoom(ask, 3, lim, nil, p); err != nil || len(p.forgot) != 1 {
		t.Errorf("without a journal: %v, forgot %q", err, p.forgot)
	}
	full := ask
	full.SessionOpen = 3
	if err := m.PlanRoom(full, 3, lim, load, p); err == nil || !strings.Contains(err.Error(), "sessions.max_plans") {
		t.Errorf("a full session: %v", err)
	}
	u.Open = 2
	if err := m.PlanRoom(ask, 3, lim, load, p); err == nil || !strings.Contains(err.Error(), "plans.max_open (2)") {
		t.Errorf("at plans.max_open: %v", err)
	}
	u.Open = 0
	open := m.For("uid:2")
	open.Journal = 400 // open plans only: nothing to forget
	ask.Key = "uid:2"
	if err := m.PlanRoom(ask, 3, lim, func(n *int64) int64 { return *n }, p); err == nil || !strings.Contains(err.Error(), "plans.max_journal_bytes") {
		t.Errorf("past the journal bound: %v", err)
	}
}

// Plans settled under one hold join their principals' finished plans, and
// each principal is trimmed once.
func TestSettledTrimsEachOnce(t *testing.T) {
	m := Uses{}
	a, b := m.For("a"), m.For("b")
	pa, pb := &plans{u: a, kept: map[string]bool{}}, &plans{u: b, kept: map[string]bool{}}
	var s Settled
	for i, u := range []*Use{a, b, a, a} {
		id := fmt.Sprintf("p%d", i)
		s.Finish(u, id)
		map[*Use]*plans{a: pa, b: pb}[u].kept[id] = true
	}
	if len(s) != 2 || s[0] != a || s[1] != b || a.kept != 3 || b.kept != 1 {
		t.Fatalf("settled %d uses, kept %d and %d", len(s), a.kept, b.kept)
	}
	lim := config.Plans{KeepFinished: 1, MaxJournalBytes: 1 << 20}
	(Settled{a}).Trim(lim, nil, pa)
	(Settled{b}).Trim(lim, nil, pb)
	if !slices.Equal(pa.forgot, []string{"p0", "p2"}) || a.kept != 1 || len(pb.forgot) != 0 || b.kept != 1 {
		t.Errorf("a forgot %q and keeps %d, b forgot %q and keeps %d", pa.forgot, a.kept, pb.forgot, b.kept)
	}
}

// A plan counted in and out of the open plans leaves the counts as they
// were, and the change is what its session counts.
func TestCountOpen(t *testing.T) {
	u := &Use{Open: 1, OpenBytes: 5}
	if d := u.Count(true, 100); d != 1 || u.Open != 2 || u.OpenBytes != 105 {
		t.Errorf("in: %d, open %d holding %d", d, u.Open, u.OpenBytes)
	}
	if d := u.Count(false, 100); d != -1 || u.Open != 1 || u.OpenBytes != 5 {
		t.Errorf("out: %d, open %d holding %d", d, u.Open, u.OpenBytes)
	}
}
