package broker

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/daemon/metrics"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// BenchmarkCreatePlan is CreatePlan's server side in-process: an agent's
// plan of /bin/true in its session (decision, journal record, events,
// metrics), without gRPC. The open-plan caps (sessions.max_plans,
// plans.max_open) are raised above b.N: closing a session to make room
// would expire its open plans, a receipt each, counted in cpu-ns/op.
func BenchmarkCreatePlan(b *testing.B) {
	r, s := planBenchRig(b)
	req := &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: r.ws}
	b.ReportAllocs()
	defer reportCPU(b)()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.CreatePlan(context.Background(), agent, s.Id, req); err != nil {
			b.Fatal(err)
		}
	}
}

// planBenchRig is a rig with metrics and an agent's session, whose open-plan
// caps are raised above b.N (see BenchmarkCreatePlan).
func planBenchRig(b *testing.B) (*rig, *termdv1.Session) {
	r := newRig(b)
	r.Metrics = metrics.New()
	cfg := r.Config()
	cfg.Sessions.MaxPlans, cfg.Plans.MaxOpen = b.N+1, b.N+1
	cfg.Plans.MaxOpenBytes, cfg.Plans.MaxJournalBytes = 1<<40, 1<<40
	s, err := r.CreateSession(context.Background(), agent, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return r, s
}

// BenchmarkDecide is the decision alone, as CreatePlan and Execute's check
// stage each make it for an agent's /bin/true.
func BenchmarkDecide(b *testing.B) {
	r := newRig(b)
	req, err := r.policyRequest(agent, &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: r.ws})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer reportCPU(b)()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := r.decide(agent, req); d.Verdict == "" {
			b.Fatal("no verdict")
		}
	}
}

// reportCPU reports the process's CPU time (user and system, GC included)
// per op from now until the returned function runs: on a loaded machine
// ns/op counts the waits for a core too.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() { b.ReportMetric(float64((processCPU()-start).Nanoseconds())/float64(b.N), "cpu-ns/op") }
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlanExecute is an agent's plan+execute pair of `pwd` in-process
// (sandbox off, as the rig is): CreatePlan, then ExecuteAndWait until the
// receipt is signed — the decision twice, the journal, the intent and the
// receipt committed durably, the spawn. cpu-ns/op is the whole process's
// CPU per pair (the child's fork/exec included, reaped children not).
func BenchmarkPlanExecute(b *testing.B) {
	r, s := planBenchRig(b)
	req := &termdv1.CommandRequest{Argv: []string{"pwd"}, Cwd: r.ws}
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := r.CreatePlan(ctx, agent, s.Id, req)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.ExecuteAndWait(ctx, agent, p.Id, s.Id, false, func([]*termdv1.Event) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
