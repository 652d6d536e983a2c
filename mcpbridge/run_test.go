package mcpbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// contentBytes is what a model reads of a result: its content blocks, as
// they travel (JSON).
func contentBytes(t *testing.T, res *mcp.CallToolResult) int {
	t.Helper()
	data, err := json.Marshal(res.Content)
	if err != nil {
		t.Fatal(err)
	}
	return len(data)
}

// links returns the URIs of a result's resource_link blocks.
func links(res *mcp.CallToolResult) []string {
	var uris []string
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			uris = append(uris, l.URI)
		}
	}
	return uris
}

// terminal_run plans and, when the policy allows, runs in one tool call:
// inside termd the plan still precedes the execution (the receipt names
// the plan and its request hash, and the plan was made before the command
// started). A command that needs approval comes back with its plan_id and
// what the agent can do (a person approves; then terminal_execute); one the
// policy refuses is an error with its reasons.
func TestRunInOneCall(t *testing.T) {
	d := startDaemon(t)
	// Commands run as the requesting agent (uid 65534): let it write here.
	if err := os.Chown(d.Workspace, int(harness.Nobody.Uid), int(harness.Nobody.Gid)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tr := range []transport{transports[0], transports[3]} {
		t.Run(tr.name, func(t *testing.T) {
			cs := connect(t, d, tr, &clientRecorder{}, false)

			// Allowed: one call, and it ran.
			run, res := call(t, cs, "terminal_run", map[string]any{"argv": []string{"pwd"}}, false)
			if res.IsError || str(run, "state") != "succeeded" || run["exit_code"] != float64(0) || str(run, "stdout") != d.Workspace+"\n" {
				t.Fatalf("terminal_run pwd: %s", text(res))
			}
			planID, execID, receiptID := str(run, "plan_id"), str(run, "execution_id"), str(run, "receipt_id")
			if planID == "" || execID == "" || receiptID == "" {
				t.Fatalf("terminal_run pwd lacks its ids: %v", run)
			}
			if got := links(res); len(got) != 2 || got[0] != "execution://"+execID || got[1] != "receipt://"+receiptID {
				t.Errorf("resource links %v, want the execution and the receipt", got)
			}
			if str(run, "execution_uri") != "execution://"+execID || str(run, "receipt_uri") != "receipt://"+receiptID {
				t.Errorf("structuredContent does not carry the links: %v", run)
			}
			if run["receipt"] != nil || run["decision"] != nil {
				t.Errorf("the receipt and decision come only with detail: %v", run)
			}
			// The plan preceded the execution: termd holds the plan, ran as
			// its execution, and signed the receipt over its request hash.
			p, err := d.Client.Plans.GetPlan(ctx, &termdv1.GetPlanRequest{PlanId: planID})
			if err != nil {
				t.Fatal(err)
			}
			pl := p.GetPlan()
			if pl.GetExecutionId() != execID || pl.GetReceiptId() != receiptID || pl.GetState() != termdv1.PlanState_PLAN_STATE_SUCCEEDED {
				t.Errorf("plan %s: execution %s receipt %s state %s; want %s, %s, succeeded", planID, pl.GetExecutionId(), pl.GetReceiptId(), pl.GetState(), execID, receiptID)
			}
			rc, err := d.Client.Receipts.GetReceipt(ctx, &termdv1.GetReceiptRequest{ReceiptId: receiptID})
			if err != nil {
				t.Fatal(err)
			}
			var receipt struct {
				PlanID      string    `json:"plan_id"`
				RequestHash string    `json:"request_hash"`
				StartedAt   time.Time `json:"started_at"`
			}
			if err := json.Unmarshal([]byte(rc.GetReceiptJson()), &receipt); err != nil {
				t.Fatal(err)
			}
			if receipt.PlanID != planID || receipt.RequestHash == "" || receipt.RequestHash != pl.GetDecision().GetRequestHash() {
				t.Errorf("receipt of plan %s hash %s; want plan %s hash %s", receipt.PlanID, receipt.RequestHash, planID, pl.GetDecision().GetRequestHash())
			}
			if created := pl.GetCreatedAt().AsTime(); receipt.StartedAt.Before(created) {
				t.Errorf("the command started (%s) before its plan was made (%s)", receipt.StartedAt, created)
			}

			// detail: the decision and the signed receipt (share form), which verifies.
			run, res = call(t, cs, "terminal_run", map[string]any{"argv": []string{"echo", "detailed"}, "detail": true}, false)
			dec, _ := run["decision"].(map[string]any)
			rcpt, _ := run["receipt"].(map[string]any)
			if res.IsError || str(dec, "verdict") != "allow" || str(dec, "request_hash") == "" || rcpt == nil || rcpt["sharing_redacted"] != true {
				t.Fatalf("terminal_run detail: %s", text(res))
			}
			verifyReceiptOffline(t, d, rcpt)

			// Asks: nothing runs; the plan id and what the agent can do.
			file := "run-" + strings.ReplaceAll(tr.name, "/", "-")
			run, res = call(t, cs, "terminal_run", map[string]any{"argv": []string{"touch", file}}, false)
			id := str(run, "plan_id")
			if res.IsError || str(run, "state") != "awaiting_approval" || id == "" || str(run, "execution_id") != "" {
				t.Fatalf("terminal_run touch: %s", text(res))
			}
			approve := "termctl --socket " + d.Socket + " approve " + id
			url := consoleURL + "/plans/" + id
			if str(run, "approve_command") != approve || str(run, "approval_url") != url {
				t.Errorf("approval: %v; want %s and %s", run, approve, url)
			}
			for _, want := range []string{"a person must approve it in the console at " + url, approve, "you cannot", "terminal_execute with plan_id " + id} {
				if !strings.Contains(text(res), want) || !strings.Contains(str(run, "next_step"), want) {
					t.Errorf("the hint does not say %q: %s", want, text(res))
				}
			}
			if _, err := os.Stat(filepath.Join(d.Workspace, file)); err == nil {
				t.Fatal("the file exists before approval")
			}
			if out, errOut, code := d.Run("termctl", "approve", id); code != 0 {
				t.Fatalf("termctl approve: %d %s %s", code, out, errOut)
			}
			ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": id}, false)
			if res.IsError || str(ex, "state") != "succeeded" || str(ex, "receipt_id") == "" {
				t.Fatalf("terminal_execute after approval: %s", text(res))
			}
			if _, err := os.Stat(filepath.Join(d.Workspace, file)); err != nil {
				t.Errorf("the approved touch did not run: %v", err)
			}

			// Refused: an error with the reasons, and nothing to approve.
			run, res = call(t, cs, "terminal_run", map[string]any{"argv": []string{"sudo", "ls"}}, false)
			if !res.IsError || str(run, "state") != "blocked" || run["reasons"] == nil || str(run, "approve_command") != "" {
				t.Errorf("terminal_run sudo ls: %s", text(res))
			}
		})
	}
}

// What results cost a model: for pwd, the content blocks of terminal_run
// (all of them, as JSON) are at most 400 bytes beyond the output; a
// tools/list answer is at most 20 KB. Before terminal_run, pwd took two
// calls and ~3 KB (an embedded receipt), and tools/list was ~46.6 KB.
func TestResultsFitAModelsContext(t *testing.T) {
	d := startDaemon(t)
	cs := connect(t, d, transports[0], &clientRecorder{}, false)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(tools)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools/list: %d bytes, %d tools", len(data), len(tools.Tools))
	if len(data) > 20<<10 {
		t.Errorf("tools/list is %d bytes, over 20 KB", len(data))
	}

	run, res := call(t, cs, "terminal_run", map[string]any{"argv": []string{"pwd"}}, false)
	if res.IsError || str(run, "state") != "succeeded" {
		t.Fatalf("terminal_run pwd: %s", text(res))
	}
	n, out := contentBytes(t, res), len(str(run, "stdout"))
	t.Logf("terminal_run pwd: 1 call, %d bytes of content for %d bytes of output: %s", n, out, text(res))
	if n-out > 400 {
		t.Errorf("terminal_run pwd: %d bytes of content beyond its %d bytes of output, over 400", n-out, out)
	}

	// The plan + execute pair, for the figures.
	plan, pres := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"pwd"}}, false)
	_, eres := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id")}, false)
	t.Logf("terminal_plan + terminal_execute pwd: 2 calls, %d + %d bytes of content", contentBytes(t, pres), contentBytes(t, eres))
	if eres.IsError || contentBytes(t, eres)-out > 400 {
		t.Errorf("terminal_execute pwd: %d bytes of content beyond its output, over 400: %s", contentBytes(t, eres)-out, text(eres))
	}
}

// All stateless (2026-07-28) HTTP clients of a bridge share its one
// daemon session. Once that session holds sessions.max_plans plans, the
// bridge plans on in a fresh session (closing the full one, nothing in it
// pending) instead of failing every later call. Here max_plans is 20 and
// 3x as many one-call commands go through one bridge; the figure
// (3,000 pairs at the default 1,000) is the same requirement, scaled.
func TestStatelessClientsOutlastMaxPlans(t *testing.T) {
	needRoot(t)
	const maxPlans = 20
	d := harness.Start(t, harness.Options{Config: agentConfig + "sessions:\n  max_plans: 20\n"})
	hb := startHTTPBridge(t, d)
	sessions := map[string]bool{}
	for i := range 3 * maxPlans {
		cs := connectTo(t, hb, "2026-07-28")
		run, res := call(t, cs, "terminal_run", map[string]any{"argv": []string{"true"}}, false)
		if res.IsError || str(run, "state") != "succeeded" {
			t.Fatalf("command %d of %d: %s", i+1, 3*maxPlans, text(res))
		}
		p, err := d.Client.Plans.GetPlan(context.Background(), &termdv1.GetPlanRequest{PlanId: str(run, "plan_id")})
		if err != nil {
			t.Fatal(err)
		}
		sessions[p.GetPlan().GetSessionId()] = true
		cs.Close()
	}
	t.Logf("%d commands at max_plans %d went into %d daemon sessions (finished plans do not count)", 3*maxPlans, maxPlans, len(sessions))
	// Plans that stay open (awaiting approval) do count: once they fill
	// the session, the bridge plans on in a fresh one.
	var full string
	for i := range maxPlans {
		cs := connectTo(t, hb, "2026-07-28")
		run, res := call(t, cs, "terminal_run", map[string]any{"argv": []string{"rm", fmt.Sprintf("no-such-file-%d", i)}}, false)
		if res.IsError || str(run, "state") != "awaiting_approval" {
			t.Fatalf("open plan %d of %d: %s", i+1, maxPlans, text(res))
		}
		p, err := d.Client.Plans.GetPlan(context.Background(), &termdv1.GetPlanRequest{PlanId: str(run, "plan_id")})
		if err != nil {
			t.Fatal(err)
		}
		full = p.GetPlan().GetSessionId()
		cs.Close()
	}
	cs := connectTo(t, hb, "2026-07-28")
	run, res := call(t, cs, "terminal_run", map[string]any{"argv": []string{"true"}}, false)
	if res.IsError || str(run, "state") != "succeeded" {
		t.Fatalf("a command after %d open plans filled the session: %s", maxPlans, text(res))
	}
	if p, err := d.Client.Plans.GetPlan(context.Background(), &termdv1.GetPlanRequest{PlanId: str(run, "plan_id")}); err != nil || p.GetPlan().GetSessionId() == full {
		t.Errorf("the command after a full session should be planned in a fresh one: %v", err)
	}
	cs.Close()
	r, err := d.Client.Sessions.ListSessions(context.Background(), &termdv1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	open := 0
	for _, s := range r.GetSessions() {
		if !s.GetClosed() {
			open++
		}
	}
	if open > 3 {
		t.Errorf("%d daemon sessions left open; full ones with nothing pending should be closed", open)
	}
}
