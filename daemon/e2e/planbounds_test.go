package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// bigArgv is an echo of n bytes of arguments (each under the policy's
// 64 KiB per argument): a large plan is a large argv.
func bigArgv(n int) []string {
	argv := []string{"echo"}
	for n > 0 {
		k := min(n, 60000)
		argv = append(argv, strings.Repeat("x", k))
		n -= k
	}
	return argv
}

// tryPlan creates a plan and returns the refusal instead of failing.
func tryPlan(t *testing.T, c *client.Client, session string, argv ...string) (*termdv1.Plan, error) {
	t.Helper()
	resp, err := c.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: session, Request: &termdv1.CommandRequest{Argv: argv}})
	return resp.GetPlan(), err
}

// wantExhausted checks a refusal: RESOURCE_EXHAUSTED, naming the key and
// each of the words (the limit's value, what to do).
func wantExhausted(t *testing.T, err error, key string, words ...string) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), key) {
		t.Fatalf("want a refusal naming %s: %v", key, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the refusal naming %s does not say %q: %v", key, w, err)
		}
	}
}

// A flood of large plans an agent never executes is refused at its bounds
// (open plans by count and by bytes, bytes per plan), with errors naming
// the key, its value and what to do; root plans meanwhile as usual. Running
// a plan frees its place (finished plans never count), and closing the
// session expires its open plans with receipts and frees what it held.
func TestPlanFloodIsBoundedPerPrincipal(t *testing.T) {
	requireRoot(t)
	addr := freeAddr(t)
	d := harness.Start(t, harness.Options{Config: agentConfig + "metrics_listen: " + addr + "\n" +
		"plans:\n  max_open: 8\n  max_open_bytes: 1048576\n  max_request_bytes: 262144\n"})
	agent := agentClient(t, d, harness.Nobody)
	s, err := agent.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{Label: "flood"})
	if err != nil {
		t.Fatal(err)
	}
	sid := s.Session.Id

	// One plan above plans.max_request_bytes is refused whole.
	_, err = tryPlan(t, agent, sid, bigArgv(300<<10)...)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "plans.max_request_bytes") || !strings.Contains(err.Error(), "262144") {
		t.Fatalf("a 300 KiB request: %v; want a refusal naming plans.max_request_bytes and its value", err)
	}

	// 200 KiB plans: the fifth fits in 1 MiB of open requests, the sixth not.
	var open []*termdv1.Plan
	for i := 0; i < 5; i++ {
		p, err := tryPlan(t, agent, sid, bigArgv(200<<10)...)
		if err != nil || p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
			t.Fatalf("large plan %d: %v %v %v", i+1, p.GetState(), p.GetDecision().GetReasons(), err)
		}
		open = append(open, p)
	}
	_, err = tryPlan(t, agent, sid, bigArgv(200<<10)...)
	wantExhausted(t, err, "plans.max_open_bytes", "1.0 MiB", "termctl sessions close")

	// Small plans up to the count: the ninth open plan is refused.
	for i := 0; i < 3; i++ {
		p, err := tryPlan(t, agent, sid, "echo", "small")
		if err != nil {
			t.Fatalf("small plan %d: %v", i+1, err)
		}
		open = append(open, p)
	}
	_, err = tryPlan(t, agent, sid, "echo", "small")
	wantExhausted(t, err, "plans.max_open", "holds 8 open plans", "(8)", "termctl execute")

	// Root is another principal, with bounds of its own: its plans are not refused.
	for i := 0; i < 5; i++ {
		if _, err := tryPlan(t, d.Client, "", bigArgv(200<<10)...); err != nil {
			t.Fatalf("root's large plan %d while the agent is at its bounds: %v", i+1, err)
		}
	}

	// A plan that ran no longer counts: the agent may plan again.
	runToEnd(t, agent, open[len(open)-1])
	if _, err := tryPlan(t, agent, sid, "echo", "again"); err != nil {
		t.Fatalf("after one of its plans ran, the agent is still refused: %v", err)
	}

	held := metric(t, addr, "termd_plans_held")
	if _, err := agent.Sessions.CloseSession(ctxT(t), &termdv1.CloseSessionRequest{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	// Its 9 plans (8 open, 1 finished) are gone from memory; root's 5 stay.
	after := metric(t, addr, "termd_plans_held")
	if held-after != 9 || metric(t, addr, "termd_open_plans") != 5 {
		t.Fatalf("plans held before closing the agent's session %.0f, after %.0f (open now %.0f); want 9 fewer and root's 5 open",
			held, after, metric(t, addr, "termd_open_plans"))
	}

	// Each open plan ended with its receipt, saying why.
	rs, err := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{SessionId: sid, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	expired := map[string]bool{}
	for _, r := range rs.Receipts {
		if r.Status == "expired" {
			expired[r.PlanId] = true
		}
	}
	for _, p := range open[:len(open)-1] {
		if !expired[p.Id] {
			t.Fatalf("open plan %s has no expired receipt after its session closed (receipts: %v)", p.Id, rs.Receipts)
		}
	}
	// A forgotten plan says where its record is.
	_, err = agent.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: open[0].Id})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "receipts") {
		t.Fatalf("a plan of a closed session: %v; want not found, pointing at its receipts", err)
	}
	// The agent plans again in a new session.
	if _, err := tryPlan(t, agent, "", bigArgv(200<<10)...); err != nil {
		t.Fatalf("after closing its session the agent is still refused: %v", err)
	}
}

// Issue 31: finished plans never count against sessions.max_plans (a
// long-lived bridge session runs thousands of commands) nor stay in memory
// beyond plans.keep_finished; their receipts stay. Open plans still do.
func TestFinishedPlansDoNotFillASession(t *testing.T) {
	addr := freeAddr(t)
	d := harness.Start(t, harness.Options{Config: "metrics_listen: " + addr + "\n" +
		"sessions:\n  max_plans: 3\nplans:\n  keep_finished: 5\n"})
	s, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	var ran []*termdv1.Plan
	for i := 0; i < 12; i++ {
		p := plan(t, d.Client, s.Session.Id, "true")
		runToEnd(t, d.Client, p)
		ran = append(ran, p)
		plan(t, d.Client, s.Session.Id, "sudo", "ls") // blocked: settled at once
	}
	if held := metric(t, addr, "termd_plans_held"); held != 5 {
		t.Fatalf("plans held after 24 finished ones with plans.keep_finished 5: %.0f", held)
	}
	if _, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: ran[0].Id}); status.Code(err) != codes.NotFound {
		t.Fatalf("the oldest finished plan should be forgotten: %v", err)
	}
	if g, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: ran[11].Id}); err != nil || g.Plan.State != termdv1.PlanState_PLAN_STATE_SUCCEEDED {
		t.Fatalf("the newest finished plan: %v %v", g, err)
	}
	rs, err := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{SessionId: s.Session.Id, Limit: 100})
	if err != nil || len(rs.Receipts) != 24 {
		t.Fatalf("receipts of the session: %d %v; want 24 (12 runs, 12 blocked)", len(rs.Receipts), err)
	}
	for i := 0; i < 3; i++ {
		plan(t, d.Client, s.Session.Id, "true")
	}
	_, err = tryPlan(t, d.Client, s.Session.Id, "true")
	wantExhausted(t, err, "sessions.max_plans", "3 open plans")
}

// Issue 35: with the default configuration a principal's finished plans
// are bounded at 200 (about 7 KB of memory each): past it the oldest are
// forgotten, their receipts stay.
func TestFinishedPlansBoundedByDefault(t *testing.T) {
	addr := freeAddr(t)
	d := harness.Start(t, harness.Options{Config: "metrics_listen: " + addr + "\n"})
	s, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	first := plan(t, d.Client, s.Session.Id, "sudo", "ls") // blocked: settled at once
	var wg sync.WaitGroup
	for range 4 { // the rest four at a time: their receipts share commits
		wg.Go(func() {
			for range 51 {
				if _, err := tryPlan(t, d.Client, s.Session.Id, "sudo", "ls"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if held := metric(t, addr, "termd_plans_held"); held != 200 {
		t.Fatalf("plans held after 205 finished ones at the default plans.keep_finished: %.0f; want 200", held)
	}
	if _, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: first.Id}); status.Code(err) != codes.NotFound {
		t.Fatalf("the oldest finished plan should be forgotten: %v", err)
	}
	if r, err := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{SessionId: s.Session.Id, Limit: 300}); err != nil || len(r.Receipts) != 205 {
		t.Fatalf("receipts of the session: %d %v; want 205", len(r.GetReceipts()), err)
	}
}

// After a flood of large plans that were never run, closing the session
// lets the running termd compact its journal, and a restart replays a small
// journal; nothing a user did is lost: a plan awaiting approval, an
// approved one, one that ran, their receipts and the chain.
func TestJournalCompactsAfterPlanFlood(t *testing.T) {
	requireRoot(t)
	addr := freeAddr(t)
	d := harness.Start(t, harness.Options{AskWrites: true, Config: agentConfig + "metrics_listen: " + addr + "\n" + floodBounds})
	kept := userWork(t, d)
	path := filepath.Join(d.StateDir, "plans.jsonl")

	agent := agentClient(t, d, harness.Nobody)
	s := floodSession(t, agent, 12)
	big := fileSize(t, path)
	if big < 12<<20 {
		t.Fatalf("the flood left a journal of %d bytes; the test wants a large one", big)
	}
	if _, err := agent.Sessions.CloseSession(ctxT(t), &termdv1.CloseSessionRequest{SessionId: s.Id}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return metric(t, addr, "termd_plan_journal_bytes") < 1<<20 }, "the running termd to compact its journal")
	if n := fileSize(t, path); n >= 1<<20 {
		t.Fatalf("journal after compaction: %d bytes (before: %d)", n, big)
	}
	d.Stop()
	lines, ids, _ := journalIDs(t, path)
	// Root's session and 3 plans, the agent's closed session.
	if lines != 5 || ids["session:"+s.Id] != 1 {
		t.Fatalf("journal after the flood, its session closed and a compaction: %d records %v; want 5", lines, ids)
	}
	d.Restart()
	kept.check(t, d)
}

// kill -9 while the running termd compacts its journal (the new file is
// written and fsync'd, not yet renamed over the old one): the restarted
// termd reads a whole journal and has everything a user did.
func TestKill9DuringJournalCompaction(t *testing.T) {
	requireRoot(t)
	flag := filepath.Join(t.TempDir(), "stall")
	d := harness.Start(t, harness.Options{AskWrites: true, Config: agentConfig + floodBounds, Env: []string{"TERMD_TEST_STALL=compact:" + flag}})
	kept := userWork(t, d)
	agent := agentClient(t, d, harness.Nobody)
	s := floodSession(t, agent, 6)
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Sessions.CloseSession(ctxT(t), &termdv1.CloseSessionRequest{SessionId: s.Id}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(d.Log(), "TERMD_TEST_STALL=compact") }, "termd to stall in a compaction")
	d.Kill9()
	d.Restart()
	path := filepath.Join(d.StateDir, "plans.jsonl")
	journalIDs(t, path) // every line whole
	kept.check(t, d)
	g, err := d.Client.Sessions.GetSession(ctxT(t), &termdv1.GetSessionRequest{SessionId: s.Id})
	if err != nil || !g.Session.Closed || g.Session.PlanCount != 0 {
		t.Fatalf("the flood's session after the restart: %v %v; want closed, holding no plans", g, err)
	}
}

// floodBounds lets an agent flood the journal (the tests of compaction).
const floodBounds = "plans:\n  max_open_bytes: 33554432\n  max_journal_bytes: 536870912\n"

// work is what a user did that must survive: a plan awaiting approval, an
// approved one and one that ran (with its receipt).
type work struct {
	waiting, approved, ran *termdv1.Plan
	receipt                string
}

func userWork(t *testing.T, d *harness.Daemon) work {
	t.Helper()
	w := work{waiting: plan(t, d.Client, "", "touch", "waiting.txt")}
	w.approved = plan(t, d.Client, w.waiting.SessionId, "touch", "approved.txt")
	if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: w.approved.Id, RequestHash: w.approved.Decision.RequestHash}); err != nil {
		t.Fatal(err)
	}
	w.ran = plan(t, d.Client, w.waiting.SessionId, "echo", "hi")
	_, rec, _, _ := runToEnd(t, d.Client, w.ran)
	w.receipt = rec.GetId()
	return w
}

func (w work) check(t *testing.T, d *harness.Daemon) {
	t.Helper()
	for p, want := range map[*termdv1.Plan]termdv1.PlanState{
		w.waiting:  termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL,
		w.approved: termdv1.PlanState_PLAN_STATE_APPROVED,
		w.ran:      termdv1.PlanState_PLAN_STATE_SUCCEEDED,
	} {
		g, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: p.Id})
		if err != nil || g.Plan.State != want {
			t.Fatalf("plan %s after the restart: %v %v, want %v", p.Id, g.GetPlan().GetState(), err, want)
		}
	}
	if g, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: w.approved.Id}); err != nil || g.Plan.Approval.GetRequestHash() != w.approved.Decision.RequestHash {
		t.Fatalf("the approval after the restart: %v %v", g.GetPlan().GetApproval(), err)
	}
	if _, err := d.Client.Receipts.GetReceipt(ctxT(t), &termdv1.GetReceiptRequest{ReceiptId: w.receipt}); err != nil {
		t.Fatalf("receipt %s after the restart: %v", w.receipt, err)
	}
	if out, errOut, code := d.Run("termctl", "audit", "verify"); code != 0 {
		t.Fatalf("audit verify after the restart: %s%s", out, errOut)
	}
	// The approved plan still runs.
	runToEnd(t, d.Client, w.approved)
	if _, err := os.Stat(filepath.Join(d.Workspace, "approved.txt")); err != nil {
		t.Fatalf("the approved plan did not run after the restart: %v", err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// The search index counts in the storage budgets: each byte of receipt
// costs its share of the index too, so a principal's daily budget is spent
// sooner than by its receipts alone, and the refusal says so.
func TestSearchIndexCountsInTheStorageBudget(t *testing.T) {
	requireRoot(t)
	_, agent := budgetDaemon(t)
	ran, refusal := runUntilRefused(t, agent, "", func() {
		// A search catches the index up with the receipts.
		if _, err := agent.Receipts.SearchReceipts(ctxT(t), &termdv1.SearchReceiptsRequest{Query: "fills the receipt"}); err != nil {
			t.Fatal(err)
		}
	})
	// Four receipts of 300 KiB fit in 1 MiB by themselves.
	if refusal == nil || !strings.Contains(refusal.Error(), "storage.per_principal_day") || !strings.Contains(refusal.Error(), "search index included") || ran > 3 {
		t.Fatalf("after %d runs of 300 KiB each against a 1 MiB budget: %v; want a refusal after at most 3, naming storage.per_principal_day and the search index", ran, refusal)
	}
	t.Logf("refused after %d runs: %v", ran, refusal)
}

// budgetDaemon starts termd with a 1 MiB daily storage budget per
// principal and a 300 KiB big.txt in the workspace, and connects an agent.
func budgetDaemon(t *testing.T) (*harness.Daemon, *client.Client) {
	t.Helper()
	d := harness.Start(t, harness.Options{Config: agentConfig + "storage:\n  per_principal_day: 1048576\n"})
	var big strings.Builder
	for big.Len() < 300<<10 {
		fmt.Fprintf(&big, "line %d of output that fills the receipt\n", big.Len())
	}
	if err := os.WriteFile(filepath.Join(d.Workspace, "big.txt"), []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return d, agentClient(t, d, harness.Nobody)
}

// runUntilRefused plans and runs `cat big.txt` until a plan or its
// execution is refused (at most 20 times), calling between after each run.
func runUntilRefused(t *testing.T, c *client.Client, session string, between func()) (ran int, refusal error) {
	t.Helper()
	for range 20 {
		p, err := tryPlan(t, c, session, "cat", "big.txt")
		if err == nil {
			_, err = c.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
		}
		if err != nil {
			return ran, err
		}
		ran++
		waitFinished(t, c, p.Id)
		between()
	}
	return ran, nil
}

// floodSession makes n plans of 250 KiB as c in a new session and returns it.
func floodSession(t *testing.T, c *client.Client, n int) *termdv1.Session {
	t.Helper()
	s, err := c.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{Label: "flood"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := tryPlan(t, c, s.Session.Id, bigArgv(250<<10)...); err != nil {
			t.Fatalf("plan %d of the flood: %v", i+1, err)
		}
	}
	return s.Session
}
