package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// kill -9 while the launcher waits for its command: before the intent is
// durable ("spawn") and after it is, before the release ("release"). The
// command never runs, the launcher dies with termd, and the plan ends
// outcome_unknown (the intent was durable) or not at all (it was not) —
// never as if it had run, and it cannot run again.
func TestKill9BeforeLauncherRelease(t *testing.T) {
	requireSandbox(t)
	for _, point := range []string{"spawn", "release"} {
		t.Run(point, func(t *testing.T) {
			flag := filepath.Join(t.TempDir(), "stall")
			if err := os.WriteFile(flag, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			d := harness.Start(t, harness.Options{Config: "sandbox: required\n", Env: []string{"TERMD_TEST_STALL=" + point + ":" + flag}})
			marker := filepath.Join(d.Workspace, "ran.txt")
			p := plan(t, d.Client, "", "touch", marker)
			if p.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
				if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _, _ = d.Client.Executions.Execute(ctx, &termdv1.ExecuteRequest{PlanId: p.Id}) }()
			waitFor(t, func() bool { return strings.Contains(d.Log(), "TERMD_TEST_STALL="+point) }, "termd to stall at "+point)
			launcher := childNamed(d.Pid(), "termd-launch")
			if launcher == 0 {
				t.Fatalf("no launcher waiting under termd at %s", point)
			}
			d.Kill9()
			waitFor(t, func() bool { return !alive(launcher) }, "the waiting launcher to die with termd")
			d.Restart()
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the command ran although termd died before releasing it")
			}
			rs, err := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var statuses []string
			for _, r := range rs.Receipts {
				if r.PlanId == p.Id {
					statuses = append(statuses, r.Status)
				}
			}
			switch {
			case len(statuses) == 1 && statuses[0] == "outcome_unknown":
			case len(statuses) == 0 && point == "spawn":
				// The intent was not committed yet: nothing ran, nothing to say.
			default:
				t.Fatalf("receipts for the plan after kill -9 at %s: %v (want one outcome_unknown)", point, statuses)
			}
			if point == "release" {
				g, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: p.Id})
				if err != nil || g.Plan.State != termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN {
					t.Fatalf("the plan after restart: %v %v", g, err)
				}
				if _, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id}); err == nil {
					t.Fatal("an interrupted plan must not run again")
				}
			}
			time.Sleep(100 * time.Millisecond)
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the command ran after the restart")
			}
		})
	}
}

// An allowed plan's journal record is not fsync'd at once; the intent is its
// durable record. A journal that lost the record (as after a power loss)
// still lets termd start, and the interrupted run is outcome_unknown.
func TestIntentWithoutPlanRecord(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	p := plan(t, d.Client, "", "sleep", "30")
	ex, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return alive(int(ex.Execution.Pid)) }, "sleep to start")
	d.Kill9()
	journal := filepath.Join(d.StateDir, "plans.jsonl")
	data, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if !strings.Contains(l, p.Id) {
			kept = append(kept, l)
		}
	}
	if err := os.WriteFile(journal, []byte(strings.Join(kept, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Restart()
	waitFor(t, func() bool { return !alive(int(ex.Execution.Pid)) }, "the orphaned command to be gone")
	rs, err := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{Status: "outcome_unknown"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Receipts) != 1 || rs.Receipts[0].PlanId != p.Id {
		t.Fatalf("want one outcome_unknown receipt for the plan whose record was lost; got %v", rs.Receipts)
	}
	ch, err := d.Client.Receipts.VerifyAuditChain(ctxT(t), &termdv1.VerifyAuditChainRequest{})
	if err != nil || !ch.Ok {
		t.Fatalf("chain: %v %v", ch, err)
	}
}

// childNamed finds a child process of ppid by its command name.
func childNamed(ppid int, comm string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(data)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < 0 || s[open+1:close] != comm {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			return pid
		}
	}
	return 0
}

// TERMD_DEBUG_PPROF's listener reports where executions spend their time:
// p50/p90 per stage over the last executions.
func TestStageReport(t *testing.T) {
	addr := freeLoopback(t)
	d := harness.Start(t, harness.Options{Env: []string{"TERMD_DEBUG_PPROF=" + addr}})
	for range 3 {
		runToEnd(t, d.Client, plan(t, d.Client, "", "true"))
	}
	got := stageReport(t, addr)
	if !strings.Contains(got, "over the last 3 executions") {
		t.Fatalf("stage report:\n%s", got)
	}
	for _, s := range []string{"check", "intent", "launch", "spawn", "run", "receipt", "total"} {
		if !regexp.MustCompile(`(?m)^` + s + `\s+\S*s\s+\S*s$`).MatchString(got) {
			t.Errorf("no p50/p90 for stage %s:\n%s", s, got)
		}
	}
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func stageReport(t *testing.T, addr string) string {
	t.Helper()
	var last error
	for range 100 {
		resp, err := http.Get("http://" + addr + "/debug/stages")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(body)
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no stage report at %s: %v", addr, last)
	return ""
}
