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
// metrics), without gRPC. A new session every 500 plans (the last one
// closed) keeps under sessions.max_plans and sessions.per_principal.
func BenchmarkCreatePlan(b *testing.B) {
	r := newRig(b)
	r.Metrics = metrics.New()
	req := &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: r.ws}
	var sid string
	b.ReportAllocs()
	defer reportCPU(b)()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%500 == 0 {
			b.StopTimer()
			if sid != "" {
				if _, err := r.CloseSession(context.Background(), agent, sid); err != nil {
					b.Fatal(err)
				}
			}
			s, err := r.CreateSession(context.Background(), agent, "bench")
			if err != nil {
				b.Fatal(err)
			}
			sid = s.Id
			b.StartTimer()
		}
		if _, err := r.CreatePlan(context.Background(), agent, sid, req); err != nil {
			b.Fatal(err)
		}
	}
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
