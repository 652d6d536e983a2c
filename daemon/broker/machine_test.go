package broker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// These tests drive the broker in-process (no gRPC, no daemon binary): the
// real policy engine, receipt store and runner (real processes), and a clock
// the test moves. They cover the plan state machine, approvals, expiry,
// replan and stale checks fast, beside the end-to-end tests in daemon/e2e.

// fakeClock is Deps.Now: time moves only when the test says so.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

var (
	operator = &termdv1.Principal{Uid: 0, Gid: 0, Name: "root", Role: termdv1.Role_ROLE_OPERATOR}
	agent    = &termdv1.Principal{Uid: 65534, Gid: 65534, Name: "nobody", Role: termdv1.Role_ROLE_AGENT}
)

type rig struct {
	*Broker
	clock      *fakeClock
	ws         string
	policyPath string
	store      *receiptstore.Store
}

const testTTL = 15 * time.Minute

var (
	runnerOnce sync.Once
	sharedRun  *runner.Runner
	runnerErr  error
)

// newRig builds a broker on temp directories with the embedded default
// policy (copied to a file, so a test can change and reload it).
func newRig(t testing.TB) *rig {
	t.Helper()
	runnerOnce.Do(func() { sharedRun, runnerErr = runner.New("") })
	if runnerErr != nil {
		t.Fatalf("runner: %v", runnerErr)
	}
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	dir, _ = filepath.EvalSymlinks(dir)
	ws := filepath.Join(dir, "ws")
	state := filepath.Join(dir, "state")
	for _, d := range []string{ws, state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(state, 0o700)
	_ = os.Chmod(ws, 0o777) // agents' commands run as uid 65534
	polPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(polPath, policy.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, err := policy.NewEngine(polPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.StateDir = state
	cfg.Workspaces = []string{ws}
	cfg.Approvals.TTL = config.Duration(testTTL)
	// The sandbox has its own tests (daemon/sandbox, daemon/e2e); these are
	// about the state machine.
	cfg.Sandbox = string(sandbox.Off)
	keys, err := receiptstore.LoadOrCreateKeys(filepath.Join(state, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := receiptstore.Open(filepath.Join(state, "receipts.db"), keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, err := New(Deps{
		Config:   func() *config.Config { return cfg },
		Policy:   eng,
		Runner:   sharedRun,
		Sandbox:  sandbox.Probe("/nonexistent/termd-launch"),
		Store:    store,
		Keys:     keys,
		Redactor: receiptstore.NewRedactor(),
		Bus:      events.New(events.Options{}),
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:      clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(5 * time.Second) })
	return &rig{Broker: b, clock: clock, ws: ws, policyPath: polPath, store: store}
}

func (r *rig) session(t *testing.T, who *termdv1.Principal) string {
	t.Helper()
	s, err := r.CreateSession(context.Background(), who, "test")
	if err != nil {
		t.Fatal(err)
	}
	return s.Id
}

func (r *rig) plan(t *testing.T, who *termdv1.Principal, session string, argv ...string) *termdv1.Plan {
	t.Helper()
	p, err := r.CreatePlan(context.Background(), who, session, &termdv1.CommandRequest{Argv: argv, Cwd: r.ws})
	if err != nil {
		t.Fatalf("plan %q: %v", argv, err)
	}
	return p
}

func (r *rig) state(t *testing.T, id string) termdv1.PlanState {
	t.Helper()
	p, err := r.GetPlan(context.Background(), operator, id)
	if err != nil {
		t.Fatal(err)
	}
	return p.State
}

// run executes a plan to its receipt and returns the plan's final state.
func (r *rig) run(t *testing.T, who *termdv1.Principal, p *termdv1.Plan) (termdv1.PlanState, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := r.ExecuteAndWait(ctx, who, p.Id, p.SessionId, false, func([]*termdv1.Event) error { return nil })
	if err != nil {
		return r.state(t, p.Id), err
	}
	return r.state(t, p.Id), nil
}

// anyKind accepts an error of any class.
const anyKind errdefs.Kind = -1

func wantErr(t *testing.T, err error, class errdefs.Kind, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error (class %v) saying %q, got none", class, words)
	}
	if class != anyKind && errdefs.KindOf(err) != class {
		t.Errorf("error %q: class %v, want %v", err, errdefs.KindOf(err), class)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// A weaker mode than the policy's default is for operators only; replanning
// an operator's weaker plan as an agent falls back to the default.
func TestModeOrdering(t *testing.T) {
	r := newRig(t)
	sa := r.session(t, agent)
	_, err := r.CreatePlan(context.Background(), agent, sa, &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: r.ws, Mode: termdv1.Mode_MODE_TRUSTED})
	wantErr(t, err, errdefs.KindPermission, "less strict", "only operators")
	p, err := r.CreatePlan(context.Background(), agent, sa, &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: r.ws, Mode: termdv1.Mode_MODE_INSPECT})
	if err != nil {
		t.Fatalf("a stricter mode is anyone's: %v", err)
	}
	if p.Decision.GetMode() != termdv1.Mode_MODE_INSPECT {
		t.Errorf("mode %s, want inspect", p.Decision.GetMode())
	}
	so := r.session(t, operator)
	op, err := r.CreatePlan(context.Background(), operator, so, &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: r.ws, Mode: termdv1.Mode_MODE_TRUSTED})
	if err != nil {
		t.Fatalf("operator in trusted mode: %v", err)
	}
	for _, c := range []struct {
		m, o policy.Mode
		want bool
	}{
		{policy.ModeTrusted, policy.ModeConfirm, true},
		{policy.ModeConfirm, policy.ModeInspect, true},
		{policy.ModeInspect, policy.ModeConfirm, false},
		{policy.ModeConfirm, policy.ModeConfirm, false},
		{policy.Mode("bogus"), policy.ModeTrusted, true}, // fail closed
	} {
		if got := c.m.MorePermissiveThan(c.o); got != c.want {
			t.Errorf("%s.MorePermissiveThan(%s) = %v", c.m, c.o, got)
		}
	}
	_ = op
}

// The state machine through the broker's own API, one scenario per row.
func TestPlanLifecycle(t *testing.T) {
	type step = lifecycleStep
	approve, refuse, deny, run, expire, replan, stalePolicy := lifecycleApprove, lifecycleRefuse, lifecycleDeny, lifecycleRun, lifecycleExpire, lifecycleReplan, lifecycleStalePolicy
	write := []string{"touch", "new.txt"} // a write: needs approval in confirm mode

	for _, c := range []struct {
		name  string
		argv  []string
		who   *termdv1.Principal
		first termdv1.PlanState
		steps []step
		final termdv1.PlanState
		// receipt is the status of the plan's last receipt ("" = none).
		receipt string
	}{
		{"allowed runs and succeeds", []string{"true"}, operator, termdv1.PlanState_PLAN_STATE_PLANNED,
			[]step{run(termdv1.PlanState_PLAN_STATE_SUCCEEDED), refuse("execute", errdefs.KindPrecondition, "in state succeeded", "replan")},
			termdv1.PlanState_PLAN_STATE_SUCCEEDED, "succeeded"},
		{"a failing command fails", []string{"false"}, operator, termdv1.PlanState_PLAN_STATE_PLANNED,
			[]step{run(termdv1.PlanState_PLAN_STATE_FAILED)}, termdv1.PlanState_PLAN_STATE_FAILED, "failed"},
		{"approval then run", write, agent, termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL,
			[]step{
				refuse("execute-agent", errdefs.KindPrecondition, "awaiting approval", "termctl approve"),
				refuse("approve-own", errdefs.KindPermission),
				refuse("approve-wrong-hash", errdefs.KindPrecondition),
				approve(operator),
				refuse("approve", errdefs.KindPrecondition, "is approved, not awaiting approval"),
				run(termdv1.PlanState_PLAN_STATE_SUCCEEDED),
			}, termdv1.PlanState_PLAN_STATE_SUCCEEDED, "succeeded"},
		{"denied, then replanned", write, agent, termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL,
			[]step{deny, refuse("approve", errdefs.KindPrecondition, "is denied, not awaiting approval", "replan"), refuse("execute", errdefs.KindPrecondition, "denied"),
				replan(termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL)},
			termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL, ""},
		{"blocked cannot be approved", []string{"sh", "-c", "id"}, agent, termdv1.PlanState_PLAN_STATE_BLOCKED,
			[]step{refuse("approve", errdefs.KindPrecondition, "is blocked, not awaiting approval"), refuse("deny", errdefs.KindPrecondition, "in state blocked"), refuse("execute", errdefs.KindPrecondition, "blocked")},
			termdv1.PlanState_PLAN_STATE_BLOCKED, "blocked"},
		{"an approval expires", write, agent, termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL,
			[]step{approve(operator), expire, refuse("execute", errdefs.KindPrecondition, "expired", "replan")},
			termdv1.PlanState_PLAN_STATE_EXPIRED, "expired"},
		{"an unapproved plan expires and is replanned", write, agent, termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL,
			[]step{expire, refuse("approve", errdefs.KindPrecondition, "is expired, not awaiting approval"), replan(termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL)},
			termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL, ""},
		{"a stale plan is refused and expires", write, agent, termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL,
			[]step{approve(operator), stalePolicy, refuse("execute", anyKind, "stale", "replan")},
			termdv1.PlanState_PLAN_STATE_EXPIRED, "expired"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			p := r.plan(t, c.who, r.session(t, c.who), c.argv...)
			if p.State != c.first {
				t.Fatalf("planned in state %s, want %s (%v)", stateWord(p.State), stateWord(c.first), p.Decision.GetReasons())
			}
			for _, s := range c.steps {
				p = s(t, r, p)
			}
			if got := r.state(t, p.Id); got != c.final {
				t.Fatalf("final state %s, want %s", stateWord(got), stateWord(c.final))
			}
			rs, err := r.store.List(receiptstore.Filter{SessionID: p.SessionId, Limit: -1})
			if err != nil {
				t.Fatal(err)
			}
			last := ""
			for _, rc := range rs {
				if rc.PlanID == p.Id {
					last = string(rc.Status)
				}
			}
			if last != c.receipt {
				t.Errorf("last receipt of the plan: %q, want %q", last, c.receipt)
			}
		})
	}
}

// lifecycleStep is one move on a plan in TestPlanLifecycle; it returns the
// plan as it is after the move.
type lifecycleStep func(t *testing.T, r *rig, p *termdv1.Plan) *termdv1.Plan

// lifecycleApprove approves the plan as who.
func lifecycleApprove(who *termdv1.Principal) lifecycleStep {
	return func(t *testing.T, r *rig, p *termdv1.Plan) *termdv1.Plan {
		got, err := r.ApprovePlan(context.Background(), who, p.Id, p.Decision.GetRequestHash())
		if err != nil {
			t.Fatalf("approve: %v", err)
		}
		return got
	}
}

// lifecycleRefuse tries what (approve, approve-own, approve-wrong-hash, deny,
// execute, execute-agent) and checks it is refused as class, naming words.
func lifecycleRefuse(what string, class errdefs.Kind, words ...string) lifecycleStep {
	return func(t *testing.T, r *rig, p *termdv1.Plan) *termdv1.Plan {
		var err error
		switch what {
		case "approve":
			_, err = r.ApprovePlan(context.Background(), operator, p.Id, p.Decision.GetRequestHash())
		case "approve-own":
			_, err = r.ApprovePlan(context.Background(), agent, p.Id, p.Decision.GetRequestHash())
		case "approve-wrong-hash":
			_, err = r.ApprovePlan(context.Background(), operator, p.Id, strings.Repeat("0", 64))
		case "deny":
			_, err = r.DenyPlan(context.Background(), operator, p.Id, "no")
		case "execute":
			_, err = r.Execute(context.Background(), operator, p.Id, p.SessionId)
		case "execute-agent":
			_, err = r.Execute(context.Background(), agent, p.Id, p.SessionId)
		}
		wantErr(t, err, class, words...)
		return p
	}
}

// lifecycleDeny denies the plan as the operator.
func lifecycleDeny(t *testing.T, r *rig, p *termdv1.Plan) *termdv1.Plan {
	got, err := r.DenyPlan(context.Background(), operator, p.Id, "not today")
	if err != nil {
		t.Fatalf("deny: %v", err)
	}
	return got
}

// lifecycleRun executes the plan as the operator: it ends in want, naming a receipt.
func lifecycleRun(want termdv1.PlanState) lifecycleStep {
	return func(t *testing.T, r *rig, p *termdv1.Plan) *termdv1.Plan {
		got, err := r.run(t, operator, p)
		if err != nil {
			t.Fatalf("execute: %v", err)
		}
		pp, _ := r.GetPlan(context.Background(), operator, p.Id)
		if got != want {
			detail := ""
			if rc, err := r.store.Get(pp.ReceiptId); err == nil {
				detail = rc.Detail + " " + rc.Stderr
			}
			t.Fatalf("ran to %s, want %s: %s", stateWord(got), stateWord(want), detail)
		}
		if pp.ReceiptId == "" {
			t.Fatal("a finished plan names no receipt")
		}
		return pp
	}
}

// lifecycleExpire moves the clock past the plan's TTL: not expired a second before.
func lifecycleExpire(t *testing.T, r *rig, p *termdv1.Plan) *termdv1.Plan {
	r.clock.Advance(testTTL - time.Second)
	r.expire()
	if s := r.state(t, p.Id); s == termdv1.PlanState_PLAN_STATE_EXPIRED {
		t.Fatal("expired before its TTL")
	}
	r.clock.Advance(2 * time.Second)
	r.expire()
	pp, _ := r.GetPlan(context.Background(), operator, p.Id)
	return pp
}

// lifecycleReplan replans the plan: a new plan, from it, in want.
func lifecycleReplan(want termdv1.PlanState) lifecycleStep {
	return func(t *testing.T, r *rig, p *termdv1.Plan) *termdv1.Plan {
		np, err := r.Replan(context.Background(), operator, p.Id)
		if err != nil {
			t.Fatalf("replan: %v", err)
		}
		if np.ReplannedFrom != p.Id || np.Id == p.Id || np.State != want {
			t.Fatalf("replan: new plan %s from %q in state %s, want a new plan from %s in %s", np.Id, np.ReplannedFrom, stateWord(np.State), p.Id, stateWord(want))
		}
		return np
	}
}

// lifecycleStalePolicy changes the policy file and reloads it: the version an
// approval was bound to is gone.
func lifecycleStalePolicy(t *testing.T, r *rig, p *termdv1.Plan) *termdv1.Plan {
	data := strings.Replace(string(policy.DefaultYAML()), "name: termd-default", "name: termd-changed", 1)
	if err := os.WriteFile(r.policyPath, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReloadPolicy(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Execute decides again on the file system as it is then: a working
// directory whose symlink the workspace's owner swapped after the plan makes
// the plan stale (the policy's path memo lasts one decision).
func TestExecuteSeesSwappedCwd(t *testing.T) {
	r := newRig(t)
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(r.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(r.ws, "cur")
	if err := os.Symlink("a", link); err != nil {
		t.Fatal(err)
	}
	p, err := r.CreatePlan(context.Background(), agent, r.session(t, agent), &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: link})
	if err != nil {
		t.Fatal(err)
	}
	if p.State != termdv1.PlanState_PLAN_STATE_PLANNED || p.Decision.Cwd != filepath.Join(r.ws, "a") {
		t.Fatalf("plan is %v in %s, want planned in %s/a", p.State, p.Decision.Cwd, r.ws)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b", link); err != nil {
		t.Fatal(err)
	}
	_, err = r.run(t, agent, p)
	wantErr(t, err, errdefs.KindPrecondition, "stale", "working directory now resolves to "+filepath.Join(r.ws, "b"))
}
