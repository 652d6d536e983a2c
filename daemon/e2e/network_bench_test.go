package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestBenchNetworkLoopback: what a plan+execute of /bin/true costs on the
// workspace loopback (joined by the spawning thread or a pre-started
// launcher) against network none (a pooled empty namespace), interleaved on
// one daemon so both see the same machine. Run with `make bench`.
func TestBenchNetworkLoopback(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	d := harness.Start(t, harness.Options{})
	s, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pair := func(network string) time.Duration {
		start := time.Now()
		resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: s.Session.Id, Request: &termdv1.CommandRequest{Argv: []string{"true"}, Network: network}})
		if err != nil || resp.Plan.State != termdv1.PlanState_PLAN_STATE_PLANNED {
			t.Fatalf("plan true (network %s): %v %v", network, err, resp.GetPlan().GetDecision().GetReasons())
		}
		runToEnd(t, d.Client, resp.Plan)
		return time.Since(start)
	}
	pair("workspace-loopback") // makes the loopback and names the launcher pool
	pair("none")
	const n = 150
	var loop, none []time.Duration
	for i := range 2 * n {
		if i%2 == 0 {
			loop = append(loop, pair("workspace-loopback"))
		} else {
			none = append(none, pair("none"))
		}
	}
	harness.BenchLine(t, "network: plan+execute /bin/true on the workspace loopback", loop, "network none", none, 1.1)
}
