package broker

import (
	"testing"
	"time"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// BenchmarkDecideCacheRatio alternates the broker's decision of an agent's
// /bin/true (through the decision cache, as CreatePlan and Execute's check
// make it) with the same decision by the engine alone, and reports the
// ratio of their times (cached/engine). Both include the daemon's context
// for the caller.
func BenchmarkDecideCacheRatio(b *testing.B) {
	r := newRig(b)
	req, err := r.policyRequest(agent, &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: r.ws})
	if err != nil {
		b.Fatal(err)
	}
	var engine, cached time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if d := r.Policy.Current().Explain(req, r.policyContext(agent)).Decision; d.Verdict == "" {
			b.Fatal("no verdict")
		}
		t1 := time.Now()
		if d := r.decide(agent, req); d.Verdict == "" {
			b.Fatal("no verdict")
		}
		cached += time.Since(t1)
		engine += t1.Sub(t0)
	}
	b.ReportMetric(float64(engine.Nanoseconds())/float64(b.N), "ns-engine/op")
	b.ReportMetric(float64(cached.Nanoseconds())/float64(b.N), "ns-cache/op")
	b.ReportMetric(float64(cached)/float64(engine), "ratio")
}
