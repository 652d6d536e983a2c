package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestBenchPlanFlood floods termd with large plans that are never run (the
// attack of issue 30: hundreds of 250 KiB plans) under the default plan
// bounds, in rounds that each close their session, and reports termd's
// memory, the journal's size and a restart's time and memory against a
// restart of an empty state measured in the same run. Run with `make
// bench` (TERMD_BENCH=1).
func TestBenchPlanFlood(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	report := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		fmt.Println("BENCH plans: " + line)
		t.Log(line)
	}
	d := harness.Start(t, harness.Options{})
	journal := filepath.Join(d.StateDir, "plans.jsonl")
	restart := func() (time.Duration, int64) {
		d.Stop()
		start := time.Now()
		d.Restart()
		return time.Since(start), procStatus(t, d.Pid(), "VmRSS")
	}
	const rounds = 3
	var base []time.Duration
	var baseRSS int64
	for range rounds {
		dt, rss := restart()
		base = append(base, dt)
		baseRSS = rss
	}

	const perRound, planBytes = 150, 250 << 10
	accepted, refused := 0, 0
	var peak int64
	for round := range 4 {
		s, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{Label: fmt.Sprint("flood ", round)})
		if err != nil {
			t.Fatal(err)
		}
		for range perRound {
			if _, err := tryPlan(t, d.Client, s.Session.Id, bigArgv(planBytes)...); err != nil {
				refused++
			} else {
				accepted++
			}
		}
		peak = max(peak, procStatus(t, d.Pid(), "VmRSS"))
		if round < 3 { // the last round's session stays open
			if _, err := d.Client.Sessions.CloseSession(ctxT(t), &termdv1.CloseSessionRequest{SessionId: s.Session.Id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(time.Second) // the sweep compacts the journal
	report("flood: %d plans of %d KiB tried in 4 sessions (3 closed), %d accepted, %d refused at the bounds", accepted+refused, planBytes>>10, accepted, refused)
	report("termd RSS: %d MiB after the flood (peak seen %d MiB); empty state after a restart %d MiB",
		procStatus(t, d.Pid(), "VmRSS")>>10, peak>>10, baseRSS>>10)
	var flooded []time.Duration
	var rss int64
	size := fileSize(t, journal)
	for range rounds {
		dt, r := restart()
		flooded = append(flooded, dt)
		rss = r
	}
	lines, _, _ := journalIDs(t, journal)
	report("journal: %.1f MiB before the restarts, %.1f MiB and %d records after", float64(size)/(1<<20), float64(fileSize(t, journal))/(1<<20), lines)
	mb, mf := median(base), median(flooded)
	report("restart: median %v after the flood vs %v with an empty state (%.2fx); termd RSS after it %d MiB (empty: %d MiB)",
		mf.Round(time.Millisecond), mb.Round(time.Millisecond), float64(mf)/float64(mb), rss>>10, baseRSS>>10)
}
