package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestBenchFleetExport (make bench) measures OTLP export from a whole termd
// against the same termd without it, in one run, with the real test
// collector:
//   - overhead per receipt: two daemons, one exporting every receipt to the
//     collector over OTLP/gRPC, one not, take turns running plan+execute of
//     /bin/true (one signed, durable receipt each); the figures are wall
//     time and termd's own CPU (every thread of the daemon: the exporter
//     included, the sandboxed command's processes not) per receipt, and
//     their ratios on/off;
//   - what one collector link sustains from a daemon: with the collector
//     down the exporting daemon makes a backlog of receipts; the collector
//     comes back and the backlog drains in batches over one connection;
//     receipts/s is the backlog over the time until the exporter's lag
//     (/metrics) is 0.
//
// No figure is asserted; every receipt reaching the collector is.
func TestBenchFleetExport(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	col := harness.StartCollector(t)
	metricsAddr := freeAddr(t)
	on := harness.Start(t, harness.Options{Config: fmt.Sprintf("metrics_listen: %s\nexport:\n  otlp:\n    endpoint: http://%s\n    protocol: grpc\n    host_name: bench-on\n    max_backoff: 1s\n", metricsAddr, col.GRPCAddr)})
	off := harness.Start(t, harness.Options{})
	type side struct {
		name string
		d    *harness.Daemon
		sess string
		wall []time.Duration // per receipt, one entry per round
		cpu  []time.Duration
	}
	sides := []*side{{name: "export on", d: on}, {name: "export off", d: off}}
	for _, s := range sides {
		r, err := s.d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		s.sess = r.Session.Id
	}
	one := func(s *side) {
		ex, _, _, _ := runToEnd(t, s.d.Client, plan(t, s.d.Client, s.sess, "true"))
		if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
			t.Fatalf("%s: true ended %s", s.name, ex.State)
		}
	}
	for _, s := range sides { // warm up
		for i := 0; i < 10; i++ {
			one(s)
		}
	}
	const rounds, per = 12, 25
	for r := 0; r < rounds; r++ {
		order := sides
		if r%2 == 1 { // alternate who goes first
			order = []*side{sides[1], sides[0]}
		}
		for _, s := range order {
			cpu0, start := harness.ThreadsCPU(s.d.Pid()), time.Now()
			for i := 0; i < per; i++ {
				one(s)
			}
			s.wall = append(s.wall, time.Since(start)/per)
			s.cpu = append(s.cpu, (harness.ThreadsCPU(s.d.Pid())-cpu0)/per)
		}
	}
	made := 10 + rounds*per
	wOn, wOff := harness.Pct(sides[0].wall, 50), harness.Pct(sides[1].wall, 50)
	cOn, cOff := harness.Pct(sides[0].cpu, 50), harness.Pct(sides[1].cpu, 50)
	harness.Bench(t, fmt.Sprintf("fleet export overhead per receipt (plan+execute /bin/true, %d rounds of %d, median of rounds): wall %v with OTLP export vs %v without: ratio %.2fx; termd CPU %v vs %v per receipt: ratio %.2fx (+%v per exported receipt)",
		rounds, per, wOn.Round(10*time.Microsecond), wOff.Round(10*time.Microsecond), float64(wOn)/float64(wOff),
		cOn.Round(10*time.Microsecond), cOff.Round(10*time.Microsecond), float64(cOn)/float64(cOff), (cOn-cOff).Round(10*time.Microsecond)))

	// Every receipt made so far arrives (nothing is asserted about when).
	lag := func() float64 { return metric(t, metricsAddr, "termd_otlp_export_lag_receipts") }
	waitUntil(t, "the exporting daemon's receipts reach the collector", func() (bool, string) {
		l := lag()
		return l == 0, fmt.Sprintf("lag %v", l)
	})

	// A backlog drained over one collector link.
	col.Kill()
	const backlog = 1200
	for i := 0; i < backlog; i++ {
		one(sides[0])
	}
	made += backlog
	// Timed from the exporter's first acknowledged batch of the backlog to
	// its last (the retry backoff before its first attempt is not the
	// link's), by its lag on /metrics, polled every 2ms.
	l0 := lag()
	col.Restart()
	deadline := time.Now().Add(2 * time.Minute)
	var first time.Time
	var lFirst float64
	var cpu0 time.Duration
	for {
		l := lag()
		if first.IsZero() && l < l0 {
			first, lFirst, cpu0 = time.Now(), l, harness.ThreadsCPU(on.Pid())
		}
		if l == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backlog did not drain to the restarted collector: lag %v of %v", l, l0)
		}
		time.Sleep(2 * time.Millisecond)
	}
	drain, cpu := time.Since(first), harness.ThreadsCPU(on.Pid())-cpu0
	rest := int(lFirst)
	if rest == 0 {
		harness.Bench(t, fmt.Sprintf("one collector link (OTLP/gRPC, batches of up to 256) from a daemon: a backlog of %v receipts was acknowledged before the first 2ms poll saw it move (too fast to time here; see TestBenchOTLPExport)", l0))
	} else {
		harness.Bench(t, fmt.Sprintf("one collector link (OTLP/gRPC, batches of up to 256) from a daemon: a backlog of %v receipts; after the first batch was acknowledged, the other %d in %v: %.0f receipts/s; termd CPU %v per receipt meanwhile",
			l0, rest, drain.Round(time.Millisecond), float64(rest)/drain.Seconds(), (cpu/time.Duration(rest)).Round(time.Microsecond)))
	}
	arrivedIDs := func() map[string]bool {
		recs, err := col.Records()
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, r := range recs {
			if r.Resource["host.name"] == "bench-on" {
				ids[r.Attrs["termd.receipt.id"]] = true
			}
		}
		return ids
	}
	if ids := arrivedIDs(); len(ids) < made {
		t.Errorf("%d distinct receipts of the exporting daemon in the collector's output, want at least the %d it made", len(ids), made)
	}
}
