package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// journalIDs reads the plan journal and counts its records per session and
// plan id.
func journalIDs(t *testing.T, path string) (lines int, ids map[string]int, raw []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids = map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var rec struct {
			Kind    string
			Session struct{ ID string } `json:"session"`
			Plan    struct{ ID string } `json:"plan"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("journal line %d: %v", lines+1, err)
		}
		ids[rec.Kind+":"+rec.Session.ID+rec.Plan.ID]++
		raw = append(raw, sc.Text())
		lines++
	}
	return lines, ids, raw
}

// The plan journal does not grow without bound: at start it is rewritten
// with one record per live session and plan, and sessions closed more than
// a week ago go with their plans. What a user had (a plan awaiting
// approval, an approved plan, finished plans) is still there.
func TestJournalIsCompactedAtStart(t *testing.T) {
	d := harness.Start(t, harness.Options{AskWrites: true})
	waiting := plan(t, d.Client, "", "touch", "waiting.txt")
	approved := plan(t, d.Client, waiting.SessionId, "touch", "approved.txt")
	if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: approved.Id, RequestHash: approved.Decision.RequestHash}); err != nil {
		t.Fatal(err)
	}
	var ran []*termdv1.Plan
	for range 5 {
		p := plan(t, d.Client, waiting.SessionId, "echo", "hi")
		runToEnd(t, d.Client, p)
		ran = append(ran, p)
	}
	d.Stop()
	path := filepath.Join(d.StateDir, "plans.jsonl")
	before, _, raw := journalIDs(t, path)

	// A session closed eight days ago, with a plan, as an older termd wrote it.
	old := time.Now().Add(-8 * 24 * time.Hour).UTC().Format(time.RFC3339)
	var sess, pl string
	for _, l := range raw {
		if sess == "" && strings.Contains(l, `"kind":"session"`) {
			sess = l
		}
		if pl == "" && strings.Contains(l, `"kind":"plan"`) {
			pl = l
		}
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(sess), &s); err != nil {
		t.Fatal(err)
	}
	sm := s["session"].(map[string]any)
	sm["id"], sm["closed"], sm["last_active_at"] = "0ld5e551-0000-4000-8000-000000000000", true, old
	var p map[string]any
	if err := json.Unmarshal([]byte(pl), &p); err != nil {
		t.Fatal(err)
	}
	pm := p["plan"].(map[string]any)
	pm["id"], pm["session_id"] = "0ld91a40-0000-4000-8000-000000000000", sm["id"]
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []map[string]any{s, p} {
		b, _ := json.Marshal(rec)
		f.Write(append(b, '\n'))
	}
	f.Close()

	d.Restart()
	after, ids, _ := journalIDs(t, path)
	// One session and 7 plans are live.
	if after != 8 || after >= before {
		t.Fatalf("journal after a restart: %d records (before: %d), want 8 (one per live session and plan): %v", after, before, ids)
	}
	for id, n := range ids {
		if n != 1 || strings.Contains(id, "0ld") {
			t.Fatalf("journal after a restart holds %s %d times: %v", id, n, ids)
		}
	}
	states := map[string]termdv1.PlanState{waiting.Id: termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL, approved.Id: termdv1.PlanState_PLAN_STATE_APPROVED}
	for _, p := range ran {
		states[p.Id] = termdv1.PlanState_PLAN_STATE_SUCCEEDED
	}
	for id, want := range states {
		g, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: id})
		if err != nil || g.Plan.State != want {
			t.Fatalf("plan %s after compaction: %v %v, want %v", id, g.GetPlan().GetState(), err, want)
		}
	}
}

// Executions ending together write their final journal records after the
// broker's mutex is released: after a kill -9, every line of the journal is
// whole, each plan's last record is its final state naming its receipt or
// (killed between the receipt and that write) its running state, never an
// older one, and a restarted termd shows each plan final with its receipt.
func TestFinalRecordsOfConcurrentExecutionsAreWholeAndLast(t *testing.T) {
	d := harness.Start(t, harness.Options{Config: "sessions:\n  max_running: 16\n"})
	const n = 12
	plans := make([]*termdv1.Plan, n)
	var wg sync.WaitGroup
	for i := range n {
		plans[i] = plan(t, d.Client, "", "echo", "hi")
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runToEnd(t, d.Client, plans[i])
		}()
	}
	wg.Wait()
	d.Kill9()
	_, _, raw := journalIDs(t, filepath.Join(d.StateDir, "plans.jsonl")) // fails on a torn line
	last := map[string]map[string]any{}
	for _, l := range raw {
		var rec struct {
			Kind string         `json:"kind"`
			Plan map[string]any `json:"plan"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind == "plan" {
			last[rec.Plan["id"].(string)] = rec.Plan
		}
	}
	for _, p := range plans {
		got := last[p.Id]
		final := got["state"] == "PLAN_STATE_SUCCEEDED" && got["receipt_id"] != nil && got["receipt_id"] != ""
		if !final && got["state"] != "PLAN_STATE_RUNNING" {
			t.Errorf("plan %s: last journal record in state %v (receipt %v), want its final state and receipt, or running", p.Id, got["state"], got["receipt_id"])
		}
	}
	d.Restart()
	for _, p := range plans {
		g, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: p.Id})
		if err != nil {
			t.Fatal(err)
		}
		if g.Plan.State != termdv1.PlanState_PLAN_STATE_SUCCEEDED || g.Plan.ReceiptId == "" {
			t.Errorf("plan %s after restart: %s receipt %q", p.Id, g.Plan.State, g.Plan.ReceiptId)
		}
	}
}
