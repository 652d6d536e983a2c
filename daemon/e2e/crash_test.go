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
//
// "pooled": the same with a pre-started launcher (an execution before fills
// the pool), which has its configuration and has confined itself, and waits
// for the go-ahead; every launcher, the idle pooled ones too, dies with termd.
func TestKill9BeforeLauncherRelease(t *testing.T) {
	requireSandbox(t)
	for _, point := range []string{"spawn", "release", "spawn-pooled", "release-pooled"} {
		t.Run(point, func(t *testing.T) {
			point, pooled := strings.CutSuffix(point, "-pooled")
			flag := filepath.Join(t.TempDir(), "stall")
			d := harness.Start(t, harness.Options{Config: "sandbox: required\n", Env: []string{"TERMD_TEST_STALL=" + point + ":" + flag}})
			if pooled {
				runToEnd(t, d.Client, plan(t, d.Client, "", "true")) // names the launcher: the pool fills
				waitFor(t, func() bool { return len(launchersOf(d.Pid(), "")) >= 2 }, "pre-started launchers")
			}
			if err := os.WriteFile(flag, nil, 0o600); err != nil {
				t.Fatal(err)
			}
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
			all := launchersOf(d.Pid(), "")
			mine := launchersOf(d.Pid(), d.Workspace)
			if len(mine) != 1 {
				t.Fatalf("%d launchers waiting in the workspace under termd at %s (want 1; all: %v)", len(mine), point, all)
			}
			if mine[0].pooled != pooled {
				t.Fatalf("the waiting launcher is pre-started: %v, want %v", mine[0].pooled, pooled)
			}
			d.Kill9()
			waitFor(t, func() bool {
				for _, l := range all {
					if alive(l.pid) {
						return false
					}
				}
				return true
			}, "every launcher to die with termd")
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

type launcherProc struct {
	pid    int
	pooled bool // started ahead ("termd-launch pooled")
}

// launchersOf lists the termd-launch children of ppid; with cwd set, only
// those whose working directory it is (a launcher that has its execution).
func launchersOf(ppid int, cwd string) []launcherProc {
	var out []launcherProc
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
		if open < 0 || close < 0 || s[open+1:close] != "termd-launch" {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) || f[0] == "Z" {
			continue
		}
		if cwd != "" {
			if wd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err != nil || wd != cwd {
				continue
			}
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, launcherProc{pid: pid, pooled: string(cmd) == "termd-launch\x00pooled\x00"})
	}
	return out
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
	for _, s := range []string{"plan", "check", "intent", "intent/encode", "intent/wait", "intent/apply", "intent/commit", "launch", "release", "spawn", "exit", "teardown", "run",
		"receipt", "receipt/encode", "receipt/wait", "receipt/apply", "receipt/commit", "total", "settle"} {
		if !regexp.MustCompile(`(?m)^` + s + `\s+\S*s\s+\S*s$`).MatchString(got) {
			t.Errorf("no p50/p90 for stage %s:\n%s", s, got)
		}
	}
	// The commits' parts are filled in: a durable commit takes time; so
	// do the plan's decision and the end's being told.
	for _, s := range []string{"intent/commit", "receipt/commit", "plan", "settle"} {
		if regexp.MustCompile(`(?m)^` + s + `\s+0s\s`).MatchString(got) {
			t.Errorf("stage %s reads 0:\n%s", s, got)
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
