package mcpbridge_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// otherAgent is a second agent principal (uid 65532, in the socket's group).
var otherAgent = &syscall.Credential{Uid: 65532, Gid: 65534}

// stdioBridge starts `termd-mcp` over stdio as cred and connects to it; the
// returned command is the bridge process, to kill as a client restart would.
func stdioBridge(t *testing.T, d *harness.Daemon, cred *syscall.Credential) (*mcp.ClientSession, *os.Process) {
	t.Helper()
	log := &syncBuf{}
	cmd := bridgeCmd(t, d, log)
	cmd.SysProcAttr.Credential = cred
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("termd-mcp (uid %d) stderr:\n%s", cred.Uid, log.String())
		}
	})
	c := mcp.NewClient(&mcp.Implementation{Name: "termd-e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd.Process
}

// A grant of scope workspace-request outlives the MCP client that asked:
// an agent's client restarts (a new termd-mcp process, so a new daemon
// session) and the same request runs without asking, its plan and receipt
// naming the grant. A session-request grant made in the old session does not
// carry over (that is why the scope exists); another principal, the same
// command in another workspace, and the grant after its expiry are not
// covered. Against a real daemon and real bridge processes; the operator
// approves with termctl.
func TestWorkspaceGrantSurvivesClientRestart(t *testing.T) {
	d, ws, ws2 := startGrantDaemon(t)
	ctx := context.Background()
	ops := grantOps{t: t, d: d, ctx: ctx}
	run, approve, planOf := ops.run, ops.approve, ops.planOf

	// The first conversation: two commands ask; the operator remembers one
	// for the workspace and the other for the session.
	cs, proc := stdioBridge(t, d, harness.Nobody)
	first := run(cs, "", "touch", "built.txt")
	sessionOne := planOf(str(first, "plan_id")).SessionId
	if str(first, "state") != "awaiting_approval" {
		t.Fatalf("touch must ask in this policy: %v", first)
	}
	out := approve(str(first, "plan_id"), "--remember", "workspace-request")
	if !strings.Contains(out, "workspace-request") || !strings.Contains(out, "from any session") {
		t.Errorf("termctl approve does not say what the grant covers:\n%s", out)
	}
	plan := planOf(str(first, "plan_id"))
	list, err := d.Client.Grants.ListGrants(ctx, &termdv1.ListGrantsRequest{})
	if err != nil || len(list.Grants) != 1 {
		t.Fatalf("grants after the approval: %v %v", list, err)
	}
	g := list.Grants[0]
	if g.Scope != termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST || g.SessionId != "" || g.Workspace != ws || g.RequestHash != plan.Decision.RequestHash || g.Principal.GetUid() != harness.Nobody.Uid {
		t.Fatalf("workspace-request grant: %v", g)
	}
	// Its default lifetime is approvals.workspace_grant_ttl (8h).
	if life := g.ExpiresAt.AsTime().Sub(g.CreatedAt.AsTime()); life != 8*time.Hour {
		t.Errorf("the grant lasts %s, want the default 8h", life)
	}
	sess := run(cs, "", "touch", "session.txt")
	approve(str(sess, "plan_id"), "--remember", "request")
	if ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(sess, "plan_id")}, false); res.IsError || str(ex, "state") != "succeeded" {
		t.Fatalf("execute the approved touch: %s", text(res))
	}
	if again := run(cs, "", "touch", "session.txt"); str(again, "state") != "succeeded" {
		t.Fatalf("the session-request grant does not cover its own session: %v", again)
	}

	// The client restarts: its bridge dies and a new one opens a new session.
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	cs, _ = stdioBridge(t, d, harness.Nobody)
	again := run(cs, "", "touch", "built.txt")
	if planOf(str(again, "plan_id")).SessionId == sessionOne {
		t.Fatalf("the restarted bridge reuses session %s; the test needs a new one", sessionOne)
	}
	if str(again, "state") != "succeeded" {
		t.Fatalf("after the client restarted, the workspace-request grant did not cover the same request: %v", again)
	}
	if p := planOf(str(again, "plan_id")); p.GrantId != g.Id {
		t.Errorf("the covered plan names grant %q, want %s", p.GrantId, g.Id)
	}
	rc, err := d.Client.Receipts.GetReceipt(ctx, &termdv1.GetReceiptRequest{ReceiptId: str(again, "receipt_id")})
	if err != nil {
		t.Fatal(err)
	}
	var receipt struct {
		GrantID string `json:"grant_id"`
	}
	if err := json.Unmarshal([]byte(rc.GetReceiptJson()), &receipt); err != nil || receipt.GrantID != g.Id {
		t.Errorf("the receipt names grant %q, want %s (%v)", receipt.GrantID, g.Id, err)
	}
	if p := run(cs, "", "touch", "session.txt"); str(p, "state") != "awaiting_approval" {
		t.Errorf("a session-request grant of the old session covered the new one: %v", p)
	}

	// Not for another principal, nor the same command in another workspace.
	other, _ := stdioBridge(t, d, otherAgent)
	op := run(other, "", "touch", "built.txt")
	if str(op, "state") != "awaiting_approval" {
		t.Errorf("another principal's same request was covered: %v", op)
	}
	if planOf(str(op, "plan_id")).Decision.RequestHash != g.RequestHash {
		t.Errorf("the other principal's request has another hash: this does not show that the grant is bound to its principal")
	}
	if p := run(cs, ws2, "touch", "built.txt"); str(p, "state") != "awaiting_approval" {
		t.Errorf("the same command in another workspace was covered: %v", p)
	}

	checkShortGrantExpires(t, ops, cs)
	// The long one is journalled: after a daemon restart it still covers
	// (a new bridge, a new session); then it is revoked.
	d.Stop()
	d.Restart()
	cs, _ = stdioBridge(t, d, harness.Nobody)
	if p := run(cs, "", "touch", "built.txt"); str(p, "state") != "succeeded" {
		t.Errorf("after a daemon restart the workspace-request grant does not cover: %v", p)
	}
	if out, errOut, code := d.Run("termctl", "grants", "revoke", g.Id); code != 0 {
		t.Fatalf("revoke: %d %s %s", code, out, errOut)
	}
	if p := run(cs, "", "touch", "built.txt"); str(p, "state") != "awaiting_approval" {
		t.Errorf("a revoked workspace-request grant still covers: %v", p)
	}
}

// startGrantDaemon starts a daemon asking before writes, with two agents
// (nobody and uid 65532) and two workspaces both agents may write in.
func startGrantDaemon(t *testing.T) (d *harness.Daemon, ws, ws2 string) {
	needRoot(t)
	root, err := os.MkdirTemp("", "termd-grant-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	ws, ws2 = filepath.Join(root, "ws"), filepath.Join(root, "ws2")
	for _, dir := range []string{root, ws, ws2} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Commands run as the requesting agent: let both agents write here.
		if err := os.Chown(dir, int(harness.Nobody.Uid), int(harness.Nobody.Gid)); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(dir, 0o775)
	}
	cfg := "socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534, 65532]\nworkspaces: [" + ws + ", " + ws2 + "]\n"
	d = harness.Start(t, harness.Options{Config: cfg, AskWrites: true, Workspace: ws})
	return d, ws, ws2
}

// grantOps are the test's moves as an agent (terminal_run through its
// bridge) and as the operator (termctl approve, the plan as stored).
type grantOps struct {
	t   *testing.T
	d   *harness.Daemon
	ctx context.Context
}

func (o grantOps) run(cs *mcp.ClientSession, dir string, argv ...string) map[string]any {
	t := o.t
	t.Helper()
	args := map[string]any{"argv": argv}
	if dir != "" {
		args["cwd"] = dir
	}
	out, res := call(t, cs, "terminal_run", args, false)
	if res.IsError {
		t.Fatalf("terminal_run %v: %s", argv, text(res))
	}
	return out
}

func (o grantOps) approve(id string, flags ...string) string {
	t, d := o.t, o.d
	t.Helper()
	out, errOut, code := d.Run("termctl", append([]string{"approve", id}, flags...)...)
	if code != 0 {
		t.Fatalf("termctl approve %s %v: %d %s %s", id, flags, code, out, errOut)
	}
	return out
}

func (o grantOps) planOf(id string) *termdv1.Plan {
	t, d, ctx := o.t, o.d, o.ctx
	t.Helper()
	p, err := d.Client.Plans.GetPlan(ctx, &termdv1.GetPlanRequest{PlanId: id})
	if err != nil {
		t.Fatal(err)
	}
	return p.Plan
}

// checkShortGrantExpires approves a workspace-request grant for 1s: once it
// is listed expired it covers nothing.
func checkShortGrantExpires(t *testing.T, ops grantOps, cs *mcp.ClientSession) {
	d, ctx := ops.d, ops.ctx
	run, approve, planOf := ops.run, ops.approve, ops.planOf
	// Expiry ends a grant: a short one, covering nothing once it expired.
	short := run(cs, "", "touch", "short.txt")
	approve(str(short, "plan_id"), "--remember", "workspace-request", "--ttl", "1s")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		l, err := d.Client.Grants.ListGrants(ctx, &termdv1.ListGrantsRequest{All: true})
		if err != nil {
			t.Fatal(err)
		}
		expired := false
		for _, x := range l.Grants {
			expired = expired || (x.RequestHash == planOf(str(short, "plan_id")).Decision.RequestHash && x.Status == "expired")
		}
		if expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 1s grant is not listed expired: %v", l.Grants)
		}
	}
	if p := run(cs, "", "touch", "short.txt"); str(p, "state") != "awaiting_approval" {
		t.Errorf("an expired workspace-request grant still covers: %v", p)
	}
}
