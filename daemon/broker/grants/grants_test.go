package grants

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

var (
	agent    = &termdv1.Principal{Uid: 1000, Gid: 1000, Name: "agent", Role: termdv1.Role_ROLE_AGENT}
	operator = &termdv1.Principal{Uid: 0, Gid: 0, Name: "root", Role: termdv1.Role_ROLE_OPERATOR}
)

// record is one journal write.
type record struct {
	id             string
	sync           bool
	grant, matches json.RawMessage
}

// host is the broker's side for these tests: a real policy and
// configuration, a clock that moves when told, open sessions, and the
// journal as the list of records written.
type host struct {
	cfg      *config.Config
	now      time.Time
	pol      *policy.Policy
	red      *receiptstore.Redactor
	sessions map[string]bool
	journal  []record
	fail     error // the journal's next write fails with it
}

func (h *host) Config() *config.Config      { return h.cfg }
func (h *host) Now() time.Time              { return h.now }
func (h *host) Policy() *policy.Policy      { return h.pol }
func (h *host) Redact(s string) string      { return h.red.Redact(s) }
func (h *host) Log() *slog.Logger           { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (h *host) SessionOpen(id string) bool  { return h.sessions[id] }
func (h *host) ProjectPolicy(v string) bool { return false }

func (h *host) WorkspaceOf(dir string) string {
	for _, ws := range h.cfg.Workspaces {
		if dir == ws || strings.HasPrefix(dir, ws+"/") {
			return ws
		}
	}
	return ""
}

func (h *host) Journal(g *Grant, sync bool) error {
	if err := h.fail; err != nil {
		h.fail = nil
		return err
	}
	data, matches, err := g.Record()
	if err != nil {
		return err
	}
	h.journal = append(h.journal, record{id: g.g.Id, sync: sync, grant: data, matches: matches})
	return nil
}

type rig struct {
	*host
	s  *Grants
	ws string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	pol, err := policy.Parse("default.yaml", policy.DefaultYAML())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Workspaces = []string{ws}
	h := &host{cfg: cfg, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), pol: pol,
		red: receiptstore.NewRedactor("s3cretvalue"), sessions: map[string]bool{"s1": true, "s2": true}}
	return &rig{host: h, s: New(h), ws: ws}
}

// plan is an operator's plan of argv in the workspace, in session sid,
// decided by the real policy; it must ask.
func (r *rig) plan(t *testing.T, sid string, by *termdv1.Principal, argv ...string) Plan {
	t.Helper()
	req := policy.Request{Argv: argv, Cwd: r.ws}
	d := r.pol.Decide(req, policy.Context{Workspaces: []string{r.ws}})
	if d.Verdict != policy.Ask {
		t.Fatalf("%q: the policy says %s (%q); these tests need a plan that asks", argv, d.Verdict, d.Reasons)
	}
	return Plan{ID: "p-" + strings.Join(argv, "-"), SessionID: sid, Requester: by, Request: req, Decision: d, Risk: termdv1.Risk_RISK_MEDIUM}
}

func (r *rig) grant(t *testing.T, p Plan, spec *termdv1.GrantSpec) *Grant {
	t.Helper()
	g, err := r.s.Make(operator, p, spec)
	if err != nil || g == nil {
		t.Fatalf("making a grant: %v %v", g, err)
	}
	if _, err := r.s.Store(g); err != nil {
		t.Fatal(err)
	}
	return g
}

func wantErr(t *testing.T, err error, kind errdefs.Kind, words string) {
	t.Helper()
	if err == nil || errdefs.KindOf(err) != kind || !strings.Contains(err.Error(), words) {
		t.Fatalf("want a %v error with %q, got %v", kind, words, err)
	}
}

func statuses(r *rig) map[string]string {
	out := map[string]string{}
	for _, g := range r.s.List(operator, true, "") {
		out[g.Id] = g.Status
	}
	return out
}

// A grant covers what it names: an exact request in its session, or a
// pattern in its workspace from any session of its principal; the oldest
// covering grant approves, and using it is journalled lazily.
func TestGrantCovers(t *testing.T) {
	r := newRig(t)
	a := r.plan(t, "s1", operator, "touch", "a.txt")
	b := r.plan(t, "s1", operator, "touch", "b.txt")
	exact := r.grant(t, a, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST})
	if n := len(r.journal); n != 1 || !r.journal[0].sync {
		t.Fatalf("a new grant must be journalled durably: %+v", r.journal)
	}
	if got := r.s.Cover(operator, "s1", a.Decision); got != exact {
		t.Fatalf("the same request in the session: %v", got)
	}
	for name, got := range map[string]*Grant{
		"another request":   r.s.Cover(operator, "s1", b.Decision),
		"another session":   r.s.Cover(operator, "s2", a.Decision),
		"another principal": r.s.Cover(agent, "s1", a.Decision),
	} {
		if got != nil {
			t.Fatalf("an exact-request session grant covered %s", name)
		}
	}
	allowed := a.Decision
	allowed.Verdict = policy.Allow
	if r.s.Cover(operator, "s1", allowed) != nil {
		t.Fatal("a grant covered a plan that does not ask")
	}

	r.now = r.now.Add(time.Second)
	pat := r.grant(t, b, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN, Pattern: "touch <any>", TtlSeconds: 3600})
	shown := r.s.List(operator, false, "")
	if len(shown) != 2 || shown[0].Id != pat.g.Id || shown[0].Workspace != r.ws || shown[0].SessionId != "" || shown[0].Pattern != "touch <any>" {
		t.Fatalf("listed: %v", shown)
	}
	if got := r.s.Cover(operator, "s2", b.Decision); got != pat {
		t.Fatal("a workspace pattern grant must cover another session of its principal")
	}
	if got := r.s.Cover(operator, "s1", a.Decision); got != exact {
		t.Fatal("the oldest covering grant approves")
	}

	p := &termdv1.Plan{Id: "p-2", Decision: &termdv1.Decision{RequestHash: b.Decision.RequestHash}}
	r.s.Approve(p, pat, r.now)
	if p.GrantId != pat.g.Id || p.Approval.GetApprover().GetName() != "root" || !p.ExpiresAt.AsTime().Equal(r.now.Add(r.cfg.Approvals.TTL.D())) || p.Approval.RequestHash != b.Decision.RequestHash {
		t.Fatalf("approved by grant: %v", p)
	}
	last := r.journal[len(r.journal)-1]
	if last.id != pat.g.Id || last.sync || !strings.Contains(string(last.grant), `"uses":1`) {
		t.Fatalf("a use must be journalled lazily: %s sync=%v %s", last.id, last.sync, last.grant)
	}
}

// Bad grant specs are refused before anything is made; "once" makes none.
func TestGrantSpecsRefused(t *testing.T) {
	r := newRig(t)
	p := r.plan(t, "s1", operator, "touch", "a.txt")
	for _, c := range []struct {
		spec  *termdv1.GrantSpec
		kind  errdefs.Kind
		words string
	}{
		{&termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN, TtlSeconds: 31 * 24 * 3600}, errdefs.KindInvalid, "30 days"},
		{&termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST, Pattern: "touch <any>"}, errdefs.KindInvalid, "exact request"},
		{&termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_ONCE, Pattern: "touch <any>"}, errdefs.KindInvalid, "scope"},
		{&termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN, Pattern: "touch -c <any>"}, errdefs.KindInvalid, "words"},
		{&termdv1.GrantSpec{Scope: termdv1.GrantScope(99)}, errdefs.KindInvalid, "unknown grant scope"},
	} {
		g, err := r.s.Make(operator, p, c.spec)
		if g != nil {
			t.Fatalf("%v made a grant", c.spec)
		}
		wantErr(t, err, c.kind, c.words)
	}
	if g, err := r.s.Make(operator, p, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_ONCE}); g != nil || err != nil {
		t.Fatalf("once: %v %v", g, err)
	}
	r.cfg.Workspaces = nil
	_, err := r.s.Make(operator, p, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST})
	wantErr(t, err, errdefs.KindPrecondition, "does not run in a workspace")
	if len(r.journal) != 0 {
		t.Fatalf("refused specs were journalled: %+v", r.journal)
	}
}

// A grant ends with its session, at its expiry, or when an operator
// revokes it (durably: a failed journal write leaves it active).
func TestGrantEnds(t *testing.T) {
	r := newRig(t)
	a := r.plan(t, "s1", operator, "touch", "a.txt")
	sess := r.grant(t, a, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST})
	ws := r.grant(t, a, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST, TtlSeconds: 3600})
	r.sessions["s1"] = false
	if st := statuses(r); st[sess.g.Id] != "expired" || st[ws.g.Id] != "active" {
		t.Fatalf("after the session closed: %v", st)
	}
	if why := r.s.StillCovers(sess.g.Id, operator, "s1", a.Decision); why != "grant "+sess.g.Id+" is expired" {
		t.Fatalf("still covers: %q", why)
	}

	_, err := r.s.Revoke(agent, ws.g.Id)
	wantErr(t, err, errdefs.KindPermission, "only operators")
	_, err = r.s.Revoke(operator, "")
	wantErr(t, err, errdefs.KindInvalid, "grant_id is empty")
	_, err = r.s.Revoke(operator, "g-nope")
	wantErr(t, err, errdefs.KindNotFound, "g-nope not found")
	r.fail = errors.New("disk full")
	_, err = r.s.Revoke(operator, ws.g.Id)
	wantErr(t, err, errdefs.KindInternal, "the grant stays active")
	if st := statuses(r); st[ws.g.Id] != "active" {
		t.Fatalf("a revocation that was not journalled took effect: %v", st)
	}
	if g, err := r.s.Revoke(operator, ws.g.Id); err != nil || g.Status != "revoked" || g.RevokedBy.GetName() != "root" {
		t.Fatalf("revoke: %v %v", g, err)
	}
	_, err = r.s.Revoke(operator, ws.g.Id)
	wantErr(t, err, errdefs.KindPrecondition, "already revoked by root")
	if r.s.Cover(operator, "s2", a.Decision) != nil {
		t.Fatal("a revoked grant still covers")
	}
	if got := r.s.List(operator, false, ""); len(got) != 0 {
		t.Fatalf("ended grants listed without all: %v", got)
	}
	if got := r.s.List(agent, true, ""); len(got) != 0 {
		t.Fatalf("an agent sees another principal's grants: %v", got)
	}

	b := r.plan(t, "s2", operator, "touch", "b.txt")
	short := r.grant(t, b, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST, TtlSeconds: 60})
	if r.s.Cover(operator, "s2", b.Decision) != short {
		t.Fatal("a fresh grant does not cover")
	}
	r.now = r.now.Add(time.Minute)
	if r.s.Cover(operator, "s2", b.Decision) != nil || statuses(r)[short.g.Id] != "expired" {
		t.Fatal("an expired grant still covers")
	}
}

// Grants survive a restart through their journal records, and a
// compaction forgets those ended more than a week ago.
func TestGrantJournalRoundTrip(t *testing.T) {
	r := newRig(t)
	a := r.plan(t, "s1", operator, "touch", "a.txt")
	pat := r.grant(t, a, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN, Pattern: "touch <any>"})
	gone := r.grant(t, a, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST})
	if _, err := r.s.Revoke(operator, gone.g.Id); err != nil {
		t.Fatal(err)
	}
	restarted := New(r.host)
	for _, rec := range r.journal { // replay: the latest record wins
		if err := restarted.Restore(rec.grant, rec.matches); err != nil {
			t.Fatal(err)
		}
	}
	before, after := r.s.List(operator, true, ""), restarted.List(operator, true, "")
	if len(after) != 2 || after[0].Id != before[0].Id || after[1].Status != "revoked" || after[0].Pattern != "touch <any>" {
		t.Fatalf("after a restart: %v\nbefore: %v", after, before)
	}
	b := r.plan(t, "s2", operator, "touch", "b.txt")
	if got := restarted.Cover(operator, "s2", b.Decision); got == nil || got.g.Id != pat.g.Id {
		t.Fatal("a restored pattern grant does not cover")
	}

	err := restarted.Restore(json.RawMessage(`{"id": 7}`), json.RawMessage(`{}`))
	if err == nil || !strings.Contains(err.Error(), "bad grant record") {
		t.Fatalf("a damaged record: %v", err)
	}
	err = restarted.Restore(json.RawMessage(`{"id": "g-x"}`), json.RawMessage(`{"binding": {}}`))
	if err == nil || !strings.Contains(err.Error(), "neither a request hash nor a pattern") {
		t.Fatalf("a record that matches nothing: %v", err)
	}

	r.now = r.now.Add(8 * 24 * time.Hour) // the revoked one ended 8 days ago; the pattern grant 1 day ago
	var kept []string
	if err := restarted.Compact(func(g *Grant) error { kept = append(kept, g.g.Id); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0] != pat.g.Id || len(restarted.List(operator, true, "")) != 1 {
		t.Fatalf("compaction kept %v", kept)
	}
	if err := restarted.Compact(func(*Grant) error { return errors.New("write failed") }); err == nil {
		t.Fatal("a failed write during compaction was not reported")
	}
}
