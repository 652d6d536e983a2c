package mcpbridge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// TestBenchLoad is TestBenchFloor's concurrent part alone, for the
// sandboxed termd only: this tree's build against TERMD_BENCH_BASE's (when
// set) in alternating rounds at each of TERMD_BENCH_CLIENTS (default
// "8,32") for TERMD_BENCH_SECONDS (default 8) a round, TERMD_BENCH_ROUNDS
// (default 2) rounds. It prints pairs/s and the CPU a pair split into
// termd's threads, the children it reaped (launchers and commands) and
// termd-mcp, and what the spawn pools served in the round.
// TERMD_BENCH_PROFILES=DIR writes a CPU profile of this tree's termd over
// the last round at each level (DIR/termd-load-N.pb.gz).
func TestBenchLoad(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the load benchmark")
	}
	needRoot(t)
	t.Setenv("TERMD_BENCH_POOLS", "1") // the debug listener, for the pools' counts
	rounds, seconds := envInt("TERMD_BENCH_ROUNDS", 2), envInt("TERMD_BENCH_SECONDS", 8)
	levels := []int{8, 32}
	if v := os.Getenv("TERMD_BENCH_CLIENTS"); v != "" {
		levels = nil
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				levels = append(levels, n)
			}
		}
	}
	profiles := os.Getenv("TERMD_BENCH_PROFILES")
	sides := []*server{startBenchTermd(t, "termd", "", "", "", "")}
	if base := os.Getenv("TERMD_BENCH_BASE"); base != "" {
		sides = append(sides, startBenchTermd(t, "base", "", filepath.Join(base, "termd"), "", ""))
	}
	for _, s := range sides { // warm up: names the launcher binary, fills the pools
		s.concurrent(t, 1, time.Second)
	}
	for _, clients := range levels {
		for r := range rounds {
			for k := range sides {
				s := sides[(r+k)%len(sides)]
				var prof chan string
				if profiles != "" && s == sides[0] && r == rounds-1 {
					prof = make(chan string, 1)
					go func() {
						prof <- fetch(t, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.debug, seconds))
					}()
				}
				l0 := loadavg()
				d0, c0, b0 := harness.ThreadsCPU(s.pids[0]), harness.ChildrenCPU(s.pids[0]), s.cpu()
				res := s.concurrent(t, clients, time.Duration(seconds)*time.Second)
				d1, c1, b1 := harness.ThreadsCPU(s.pids[0]), harness.ChildrenCPU(s.pids[0]), s.cpu()
				n := time.Duration(max(1, len(res.ok)))
				harness.Bench(t, fmt.Sprintf("load: %2d clients round %d %-6s: %6.1f pairs/s, p50 %v, %d failed, CPU/pair %v = termd %v + children %v + termd-mcp %v; load %s; %s",
					clients, r+1, s.name, float64(len(res.ok))/res.wall.Seconds(), ms(harness.Pct(res.ok, 50)), res.failed,
					ms((b1-b0)/n), ms((d1-d0)/n), ms((c1-c0)/n), ms((b1-b0-(d1-d0)-(c1-c0))/n), l0, poolsLine(t, s.debug)))
				if prof != nil {
					file := filepath.Join(profiles, fmt.Sprintf("termd-load-%d.pb.gz", clients))
					if err := os.WriteFile(file, []byte(<-prof), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
}
