package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/termd/termd/internal/cmdline"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// agentStep is one command of the agent day (bench/agentday/workload.txt).
type agentStep struct {
	dir, line string
	argv      []string
	grant     string // the pattern an operator remembers ("one grant per kind")
	twoGrants bool   // one of the two kinds granted in the "two grants" run
}

func loadAgentDay(t *testing.T) []agentStep {
	t.Helper()
	data, err := os.ReadFile("../../bench/agentday/workload.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []agentStep
	for n, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var st agentStep
		if i := strings.Index(line, "## two-grants"); i >= 0 {
			st.twoGrants = true
			line = strings.TrimSpace(line[:i])
		}
		if i := strings.Index(line, "## grant:"); i >= 0 {
			st.grant = strings.TrimSpace(line[i+len("## grant:"):])
			line = strings.TrimSpace(line[:i])
		}
		dir, cmd, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("workload.txt:%d: want `DIR: COMMAND`, got %q", n+1, raw)
		}
		argv, err := cmdline.Split(cmd)
		if err != nil {
			t.Fatalf("workload.txt:%d: %v", n+1, err)
		}
		st.dir, st.line, st.argv = dir, cmd, argv
		out = append(out, st)
	}
	return out
}

// agentDayRun is one configuration of the day and what it cost.
type agentDayRun struct {
	name    string
	sandbox string // required or off
	grants  string // "", "each" (one per kind) or "two"
	// askWrites: the policy setting sandboxed_workspace_writes is ask (the
	// default allow runs plain workspace writes without approval under the
	// sandbox).
	askWrites bool

	plans, asked, byGrant, denied, auto, failed int
	askedLines, deniedLines                     []string
	d                                           *harness.Daemon
	session                                     string
}

// setUpAgentDay copies the fixture projects into the workspace, each its own
// git repository with one commit.
func setUpAgentDay(t *testing.T, ws string) {
	t.Helper()
	for _, p := range []string{"go", "js"} {
		dst := filepath.Join(ws, p)
		if out, err := exec.Command("cp", "-r", "../../bench/agentday/fixtures/"+p, dst).CombinedOutput(); err != nil {
			t.Fatalf("copying the %s fixture: %v %s", p, err, out)
		}
		gitRepo(t, dst)
		for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "initial"}} {
			if out, err := exec.Command("git", append([]string{"-C", dst}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
	}
}

// runAgentDay plays the workload through a fresh termd in confirm mode. An
// operator approves every plan that asks (remembering it as a session grant
// when the run's grant rule says so) and every plan runs.
func runAgentDay(t *testing.T, steps []agentStep, r *agentDayRun) {
	t.Helper()
	r.d = harness.Start(t, harness.Options{Config: "sandbox: " + r.sandbox + "\n", AskWrites: r.askWrites})
	d := r.d
	setUpAgentDay(t, d.Workspace)
	s, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{Label: "agent day: " + r.name})
	if err != nil {
		t.Fatal(err)
	}
	r.session = s.Session.Id
	granted := map[string]bool{}
	for _, st := range steps {
		r.plans++
		resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: r.session, Request: &termdv1.CommandRequest{Argv: st.argv, Cwd: st.dir, TimeoutSeconds: 900}})
		if err != nil {
			t.Fatalf("%s: plan %q: %v", r.name, st.line, err)
		}
		p := resp.Plan
		switch p.State {
		case termdv1.PlanState_PLAN_STATE_PLANNED:
			r.auto++
		case termdv1.PlanState_PLAN_STATE_APPROVED:
			r.byGrant++
		case termdv1.PlanState_PLAN_STATE_BLOCKED:
			r.denied++
			r.deniedLines = append(r.deniedLines, st.dir+": "+st.line+" — "+strings.Join(p.Decision.Reasons, "; "))
			continue
		case termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL:
			r.asked++
			r.askedLines = append(r.askedLines, st.dir+": "+st.line)
			var spec *termdv1.GrantSpec
			if pat := st.grant; pat != "" && !granted[pat] && (r.grants == "each" || r.grants == "two" && st.twoGrants) {
				spec = &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN, Pattern: pat}
				granted[pat] = true
			}
			ap, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash, Grant: spec})
			if err != nil {
				t.Fatalf("%s: approving %q: %v", r.name, st.line, err)
			}
			p = ap.Plan
		default:
			t.Fatalf("%s: %q planned as %v", r.name, st.line, p.State)
		}
		if ex := runTolerant(t, d, p); ex != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
			r.failed++
			t.Logf("%s: %s: %s ended %v", r.name, st.dir, st.line, ex)
		}
	}
}

// runTolerant runs a plan to its end; a command that fails is part of the
// day (tests fail before the fix), not of the benchmark.
func runTolerant(t *testing.T, d *harness.Daemon, p *termdv1.Plan) termdv1.ExecutionState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := d.Client.Executions.ExecuteAndWait(ctx, &termdv1.ExecuteAndWaitRequest{PlanId: p.Id})
	if err != nil {
		t.Fatalf("executing %q: %v", p.Decision.GetArgv(), err)
	}
	state := termdv1.ExecutionState_EXECUTION_STATE_UNSPECIFIED
	for {
		m, err := st.Recv()
		if err != nil {
			return state
		}
		if m.Event.Kind == termdv1.EventKind_EVENT_KIND_FINISHED {
			state = m.Event.GetExecution().State
		}
	}
}

// hostileCase is what the benchmark reads of the policy's adversarial corpus.
type hostileCase struct {
	Name string            `yaml:"name"`
	Argv []string          `yaml:"argv"`
	Cmd  string            `yaml:"cmd"`
	Env  map[string]string `yaml:"env"`
	Mode string            `yaml:"mode"`
	Cwd  string            `yaml:"cwd"`
	// Grantable: an ordinary command that asks for a person's decision; a
	// grant for its pattern may cover it.
	Grantable bool `yaml:"grantable"`
}

// newlyAllowed plans every hostile corpus case in the session that holds the
// run's grants and in a fresh session of the same principal, and names the
// cases the grants made runnable without asking: attacks (newly) and
// ordinary commands marked grantable, which a grant for their pattern is
// meant to cover (granted).
func newlyAllowed(t *testing.T, r *agentDayRun) (cases int, newly, granted []string) {
	t.Helper()
	data, err := os.ReadFile("../policy/testdata/corpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cs []hostileCase
	if err := yaml.Unmarshal(data, &cs); err != nil {
		t.Fatal(err)
	}
	d := r.d
	fresh, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{Label: "no grants"})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	subst := strings.NewReplacer("{ws}", filepath.Join(d.Workspace, "go"), "{home}", "/root", "{out}", out, "{prot}", d.StateDir)
	runnable := func(session string, c hostileCase) bool {
		req := &termdv1.CommandRequest{Command: subst.Replace(c.Cmd), Env: map[string]string{}, Cwd: "go"}
		for _, a := range c.Argv {
			req.Argv = append(req.Argv, subst.Replace(a))
		}
		for k, v := range c.Env {
			req.Env[k] = subst.Replace(v)
		}
		if c.Cwd != "" {
			req.Cwd = filepath.Join("go", subst.Replace(c.Cwd))
		}
		if c.Mode != "" {
			m, ok := termdv1.Mode_value["MODE_"+strings.ToUpper(c.Mode)]
			if !ok {
				return false // an unknown mode is refused before a plan exists
			}
			req.Mode = termdv1.Mode(m)
		}
		resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: session, Request: req})
		if err != nil {
			return false // refused before a plan exists
		}
		st := resp.Plan.State
		return st == termdv1.PlanState_PLAN_STATE_PLANNED || st == termdv1.PlanState_PLAN_STATE_APPROVED
	}
	for _, c := range cs {
		cases++
		if runnable(r.session, c) && !runnable(fresh.Session.Id, c) {
			if c.Grantable {
				granted = append(granted, c.Name)
			} else {
				newly = append(newly, c.Name)
			}
		}
	}
	return cases, newly, granted
}

// TestBenchAgentDay measures how often an operator is asked during a
// realistic agent day (bench/agentday), in confirm mode, with the sandbox on
// and off, without grants, with one grant per kind and with two grants.
// Run with `make bench` (TERMD_BENCH=1).
func TestBenchAgentDay(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	requireRoot(t)
	steps := loadAgentDay(t)
	runs := []*agentDayRun{
		{name: "sandbox off, no grants", sandbox: "off"},
		{name: "sandbox off, one grant per kind", sandbox: "off", grants: "each"},
		{name: "sandbox on, no grants", sandbox: "required"},
		{name: "sandbox on, one grant per kind", sandbox: "required", grants: "each"},
		{name: "sandbox on, two grants", sandbox: "required", grants: "two"},
		{name: "sandbox on, two grants, writes ask", sandbox: "required", grants: "two", askWrites: true},
	}
	report := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		fmt.Println("BENCH agentday: " + line)
		t.Log(line)
	}
	for _, r := range runs {
		runAgentDay(t, steps, r)
		report("%-42s plans %d  asked %2d  approved by a grant %2d  denied %d  auto-allowed %2d  (commands that failed: %d)", r.name+":", r.plans, r.asked, r.byGrant, r.denied, r.auto, r.failed)
	}
	for _, r := range runs {
		if r.grants == "" && r.sandbox == "required" {
			report("asked with the sandbox on and no grants: %s", strings.Join(r.askedLines, " | "))
		}
		if r.grants == "two" && r.askWrites {
			report("asked with the sandbox on, two grants and sandboxed_workspace_writes: ask: %s", strings.Join(r.askedLines, " | "))
		}
		if r.grants == "two" && !r.askWrites {
			report("asked with the sandbox on and two grants: %s", strings.Join(r.askedLines, " | "))
			verdict := "met"
			if r.asked > 5 {
				verdict = "missed"
			}
			report("target ≤ 5 asks with the sandbox on and two grants: %s (%d)", verdict, r.asked)
		}
		for _, l := range r.deniedLines {
			report("denied in %q: %s", r.name, l)
		}
	}
	for _, r := range runs {
		if r.grants == "" {
			continue
		}
		n, newly, granted := newlyAllowed(t, r)
		report("%s: hostile corpus cases newly allowed by its grants: %d of %d (and %d ordinary commands marked grantable that its grants cover, as meant: %s)", r.name, len(newly), n, len(granted), strings.Join(granted, " "))
		if len(newly) > 0 {
			t.Errorf("%s: grants made hostile corpus cases runnable without asking: %v", r.name, newly)
		}
	}
}
