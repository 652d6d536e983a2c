package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// gitRepo makes the workspace a git repository with an identity.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.name", "Test"}, {"config", "user.email", "test@example.com"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

// stage writes a change and stages it, as an editor and `git add` would.
func stage(t *testing.T, dir string, n int) {
	t.Helper()
	name := filepath.Join(dir, fmt.Sprintf("f%d.txt", n))
	if err := os.WriteFile(name, []byte(fmt.Sprintf("change %d\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", dir, "add", name).CombinedOutput(); err != nil {
		t.Fatalf("git add: %v %s", err, out)
	}
}

func approveWith(t *testing.T, d *harness.Daemon, p *termdv1.Plan, scope termdv1.GrantScope, pattern string) *termdv1.Grant {
	t.Helper()
	resp, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash, Grant: &termdv1.GrantSpec{Scope: scope, Pattern: pattern}})
	if err != nil {
		t.Fatalf("approving %s with a grant: %v", p.Id, err)
	}
	if resp.Grant == nil || resp.Grant.Id == "" {
		t.Fatalf("approving with scope %v made no grant", scope)
	}
	return resp.Grant
}

func runOK(t *testing.T, d *harness.Daemon, p *termdv1.Plan) map[string]any {
	t.Helper()
	ex, rec, out, errOut := runToEnd(t, d.Client, p)
	if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("%q: %v %s %s %s", p.Decision.Argv, ex.State, ex.Error, out, errOut)
	}
	return receiptJSON(t, d.Client, rec.Id)
}

// The "done when" for grants, against a real daemon: a session grant
// for `git commit -m <any>` approves the next ten commits, each receipt names
// it; it does not cover --amend, another principal, a revoked grant or a
// reloaded policy of another version; agents cannot make one; grants survive
// a restart.
func TestGrantsRememberApprovals(t *testing.T) {
	requireRoot(t)
	// Grants remember approvals of writes that ask: with the default
	// (sandboxed_workspace_writes: allow) the sandbox lets git commit run.
	d := harness.Start(t, harness.Options{Config: agentConfig, Policy: harness.AskWritesPolicy(t)})
	gitRepo(t, d.Workspace)

	stage(t, d.Workspace, 0)
	first := plan(t, d.Client, "", "git", "commit", "-m", "first")
	if first.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("git commit in confirm mode must ask: %v %v", first.State, first.Decision.Reasons)
	}
	if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: first.Id, RequestHash: first.Decision.RequestHash,
		Grant: &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN, Pattern: "git <any> -m <any>"}}); err == nil || !strings.Contains(err.Error(), "subcommand") {
		t.Fatalf("a pattern that lets the subcommand vary must be refused naming it: %v", err)
	}
	g := approveWith(t, d, first, termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN, "git commit -m <any>")
	if r := runOK(t, d, first); r["grant_id"] != nil {
		t.Fatalf("the approving plan's own receipt names a grant: %v", r["grant_id"])
	}

	for i := 1; i <= 10; i++ {
		stage(t, d.Workspace, i)
		p := plan(t, d.Client, "", "git", "commit", "-m", fmt.Sprintf("change %d", i))
		if p.State != termdv1.PlanState_PLAN_STATE_APPROVED || p.GrantId != g.Id {
			t.Fatalf("commit %d: %v grant %q; want approved by %s (%v)", i, p.State, p.GrantId, g.Id, p.Decision.Reasons)
		}
		r := runOK(t, d, p)
		if r["grant_id"] != g.Id || r["approved"] != true || r["schema_version"] != "1.7" {
			t.Fatalf("commit %d: receipt grant_id %v approved %v schema %v; want %s", i, r["grant_id"], r["approved"], r["schema_version"], g.Id)
		}
	}
	if log, _ := exec.Command("git", "-C", d.Workspace, "rev-list", "--count", "HEAD").Output(); strings.TrimSpace(string(log)) != "11" {
		t.Fatalf("want 11 commits, git says %q", log)
	}

	// Not the pattern: options are fixed.
	if p := plan(t, d.Client, "", "git", "commit", "--amend", "-m", "x"); p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || p.GrantId != "" {
		t.Fatalf("git commit --amend: %v grant %q; want awaiting approval", p.State, p.GrantId)
	}
	if p := plan(t, d.Client, "", "git", "commit", "-m", "--amend"); p.GrantId != g.Id {
		t.Fatalf("a message that looks like an option is still a message: %v grant %q", p.State, p.GrantId)
	}

	// Another principal: an agent in the same workspace is not covered, and
	// cannot make a grant.
	out, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "plan", "-o", "json", "--", "git", "commit", "-m", "agent")
	var ap struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &ap); err != nil || ap.ID == "" || !strings.Contains(out, `"state": "awaiting_approval"`) || strings.Contains(out, g.Id) {
		t.Fatalf("the agent's commit must await approval, not use the operator's grant: code %d err %v\n%s%s", code, err, out, errOut)
	}
	_, errOut, code = d.RunAs(harness.Nobody, "termctl", nil, "approve", ap.ID, "--remember", "session-pattern", "--pattern", "git commit -m <any>")
	if code == 0 || !strings.Contains(errOut, "needs the operator role") {
		t.Fatalf("an agent making a grant: exit %d %q; want PERMISSION_DENIED (needs the operator role)", code, errOut)
	}

	// Grants survive a restart.
	d.Stop()
	d.Restart()
	stage(t, d.Workspace, 11)
	p := plan(t, d.Client, "", "git", "commit", "-m", "after restart")
	if p.State != termdv1.PlanState_PLAN_STATE_APPROVED || p.GrantId != g.Id {
		t.Fatalf("after a restart: %v grant %q; want approved by %s", p.State, p.GrantId, g.Id)
	}
	runOK(t, d, p)
	out, _, _ = d.Run("termctl", "grants", "list")
	if !strings.Contains(out, g.Id) || !strings.Contains(out, "git commit -m <any>") || !strings.Contains(out, "active") {
		t.Fatalf("termctl grants list after a restart:\n%s", out)
	}

	// Revocation ends it at once, also for a plan it approved that has not run.
	stage(t, d.Workspace, 12)
	pending := plan(t, d.Client, "", "git", "commit", "-m", "approved, then revoked")
	if pending.GrantId != g.Id {
		t.Fatalf("want covered before revocation: %v", pending.State)
	}
	if out, errOut, code := d.Run("termctl", "grants", "revoke", g.Id); code != 0 || !strings.Contains(out, "revoked grant "+g.Id) {
		t.Fatalf("termctl grants revoke: %d %s %s", code, out, errOut)
	}
	if _, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: pending.Id}); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("executing a plan whose grant was revoked: %v; want refused as stale naming the revocation", err)
	}
	p = plan(t, d.Client, "", "git", "commit", "-m", "after revoke")
	if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || p.GrantId != "" {
		t.Fatalf("after revocation: %v grant %q; want awaiting approval", p.State, p.GrantId)
	}

	// A workspace grant, then a policy of another version: it lapses.
	ws := approveWith(t, d, p, termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN, "git commit -m <any>")
	runOK(t, d, p)
	stage(t, d.Workspace, 13)
	if p := plan(t, d.Client, "", "git", "commit", "-m", "workspace grant"); p.GrantId != ws.Id {
		t.Fatalf("the workspace grant does not cover: %v %q", p.State, p.GrantId)
	}
	text := strings.Replace(harness.AskWritesPolicy(t), "name: termd-default", "name: termd-default-edited", 1)
	if err := os.WriteFile(d.PolicyPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Client.Policy.ReloadPolicy(ctxT(t), &termdv1.ReloadPolicyRequest{}); err != nil || !r.Changed {
		t.Fatalf("reload: %v %v", r, err)
	}
	if p := plan(t, d.Client, "", "git", "commit", "-m", "new policy"); p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || p.GrantId != "" {
		t.Fatalf("after a policy reload with another version: %v grant %q; want awaiting approval", p.State, p.GrantId)
	}
	list, err := d.Client.Grants.ListGrants(ctxT(t), &termdv1.ListGrantsRequest{All: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, x := range list.Grants {
		seen[x.Id] = x.Status
	}
	if seen[g.Id] != "revoked" || !strings.HasPrefix(seen[ws.Id], "lapsed") {
		t.Fatalf("grant statuses %v; want %s revoked and %s lapsed", seen, g.Id, ws.Id)
	}
}
