package mcpbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestBenchTermdAB compares termd as built from this tree (B) with another
// build (A: the termd in TERMD_BENCH_BASE=DIR, e.g. main's `go build -o DIR
// ./cmd/...`) in one run, alternating rounds so that load from elsewhere
// hits both alike: the gRPC plan+execute pair of /bin/true (wall time and
// termd's CPU per pair, from /proc: each daemon's total over the phase, its
// background work included) and the MCP pair over streamable HTTP
// (mcp_pairs.py, stateless 2026-07-28; one bridge from this tree per
// daemon; short runs, alternating), each against the durable floor of the
// same run. gRPC pairs alternate one by one. Run with TERMD_BENCH=1 on an
// otherwise idle machine if you can: what else runs lands on both sides,
// but unevenly over short stretches. TERMD_BENCH_POOLS=1 prints each
// side's spawn pools' counts (from /debug/stages, where a build has them).
func TestBenchTermdAB(t *testing.T) {
	base := os.Getenv("TERMD_BENCH_BASE")
	if os.Getenv("TERMD_BENCH") != "1" || base == "" {
		t.Skip("set TERMD_BENCH=1 and TERMD_BENCH_BASE=DIR (a directory holding another termd build) to compare them")
	}
	if _, err := os.Stat(filepath.Join(base, "termd")); err != nil {
		t.Fatalf("TERMD_BENCH_BASE: %v", err)
	}
	script := os.Getenv("MCP_PAIRS")
	if script == "" {
		script = "/work/shared/bench/mcp_pairs.py"
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("%v (set MCP_PAIRS to mcp_pairs.py)", err)
	}
	needRoot(t)
	ctx := context.Background()
	start := func(name, dir string, env ...string) *abSide {
		bin := ""
		if dir != "" {
			bin = filepath.Join(dir, "termd")
		}
		debug := poolsDebug(t)
		d := harness.Start(t, harness.Options{Config: agentConfig, AskWrites: true, Bin: bin, Env: append(env, "TERMD_DEBUG_PPROF="+debug), Args: []string{"--console-url", consoleURL}})
		s, err := d.Client.Sessions.CreateSession(ctx, &termdv1.CreateSessionRequest{Label: "ab"})
		if err != nil {
			t.Fatal(err)
		}
		return &abSide{name: name, d: d, hb: startHTTPBridgeProfiled(t, d, ""), sid: s.GetSession().GetId(), debug: debug}
	}
	// TERMD_BENCH_B_ENV=K=V[,K=V]: environment for B only (GOGC=200, say).
	var benv []string
	if e := os.Getenv("TERMD_BENCH_B_ENV"); e != "" {
		benv = strings.Split(e, ",")
	}
	sides := []*abSide{start("A (TERMD_BENCH_BASE)", base), start("B (this tree) "+strings.Join(benv, " "), "", benv...)}

	for _, s := range sides { // warm up
		for range 10 {
			abGRPCPair(t, ctx, s)
		}
		abMCPRound(t, script, s, 5, 5)
	}
	// gRPC pairs alternate one by one; each daemon's CPU is its total over
	// the whole phase (background work included), per pair.
	const pairs, mcpRounds, mcpPer, warmup = 300, 12, 20, 1
	var floor []time.Duration
	cpu0 := []time.Duration{harness.CPUTime(sides[0].d.Pid()), harness.CPUTime(sides[1].d.Pid())}
	for i := range pairs {
		if i%10 == 0 {
			floor = append(floor, harness.Floor(t, sides[0].d.StateDir, 2)...)
		}
		for j := range sides {
			s := sides[(i+j)%2]
			s.grpc = append(s.grpc, abGRPCPair(t, ctx, s))
		}
	}
	for j, s := range sides {
		s.grpcCPU, s.grpcN = harness.CPUTime(s.d.Pid())-cpu0[j], pairs
		cpu0[j] = harness.CPUTime(s.d.Pid())
	}
	// MCP pairs: short mcp_pairs.py runs, alternating.
	for r := range mcpRounds {
		for j := range sides {
			s := sides[(r+j)%2]
			s.mcp = append(s.mcp, abMCPRound(t, script, s, mcpPer, warmup))
			s.mcpPairs += mcpPer + warmup
		}
	}
	for j, s := range sides {
		s.mcpCPU = harness.CPUTime(s.d.Pid()) - cpu0[j]
	}
	fm := harness.Pct(floor, 50)
	for _, s := range sides {
		if l := poolsLine(t, s.debug); l != "" {
			harness.Bench(t, fmt.Sprintf("ab: %s %s", s.name, l))
		}
		g := harness.Pct(s.grpc, 50)
		harness.Bench(t, fmt.Sprintf("ab: %s gRPC plan+execute /bin/true median %v (p90 %v), %.2fx the floor (median %v); termd CPU per pair %v",
			s.name, g.Round(10*time.Microsecond), harness.Pct(s.grpc, 90).Round(10*time.Microsecond), float64(g)/float64(fm), fm.Round(10*time.Microsecond), (s.grpcCPU/time.Duration(s.grpcN)).Round(10*time.Microsecond)))
		m := harness.Pct(s.mcp, 50)
		harness.Bench(t, fmt.Sprintf("ab: %s MCP terminal_plan pwd + terminal_execute (stateless) median of round medians %v, %.2fx the floor; termd CPU per MCP pair %v",
			s.name, m.Round(10*time.Microsecond), float64(m)/float64(fm), (s.mcpCPU/time.Duration(s.mcpPairs)).Round(10*time.Microsecond)))
	}
	a, b := sides[0], sides[1]
	harness.Bench(t, fmt.Sprintf("ab: B/A gRPC pair median %.3f, termd CPU per gRPC pair %.3f; MCP pair median %.3f, termd CPU per MCP pair %.3f",
		float64(harness.Pct(b.grpc, 50))/float64(harness.Pct(a.grpc, 50)),
		float64(b.grpcCPU)/float64(b.grpcN)/(float64(a.grpcCPU)/float64(a.grpcN)),
		float64(harness.Pct(b.mcp, 50))/float64(harness.Pct(a.mcp, 50)),
		float64(b.mcpCPU)/float64(b.mcpPairs)/(float64(a.mcpCPU)/float64(a.mcpPairs))))
}

// abSide is one daemon of the A/B comparison, with what was measured of it.
type abSide struct {
	name     string
	d        *harness.Daemon
	hb       *httpBridge
	sid      string
	grpc     []time.Duration
	grpcCPU  time.Duration
	grpcN    int
	mcp      []time.Duration // per-round medians
	mcpCPU   time.Duration
	mcpPairs int
	debug    string // TERMD_DEBUG_PPROF's address
}

// abGRPCPair plans and executes /bin/true over gRPC on side s, and returns
// how long the pair took.
func abGRPCPair(t *testing.T, ctx context.Context, s *abSide) time.Duration {
	began := time.Now()
	p, err := s.d.Client.Plans.CreatePlan(ctx, &termdv1.CreatePlanRequest{SessionId: s.sid, Request: &termdv1.CommandRequest{Argv: []string{"true"}, Cwd: s.d.Workspace}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.d.Client.Executions.ExecuteAndWait(ctx, &termdv1.ExecuteAndWaitRequest{PlanId: p.GetPlan().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	return time.Since(began)
}

// abMCPRound runs n MCP pairs (after warmup ones) against side s's bridge
// with mcp_pairs.py (script), and returns the pairs' median.
func abMCPRound(t *testing.T, script string, s *abSide, n, warmup int) (median time.Duration) {
	u, err := url.Parse(s.hb.URL)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", script, "pairs", "--port", u.Port(), "--era", "modern", "--n", fmt.Sprint(n), "--warmup", fmt.Sprint(warmup))
	cmd.Env = append(os.Environ(), "MCP_BENCH_PATH="+u.Path, "MCP_BENCH_TOKEN="+s.hb.Token)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp_pairs.py: %v\n%s", err, out)
	}
	var res struct {
		Pairs struct {
			Pair struct {
				Median float64 `json:"median_ms"`
			} `json:"pair"`
			Statuses map[string]int `json:"receipt_statuses"`
		} `json:"pairs"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("mcp_pairs.py: %v\n%s", err, out)
	}
	if res.Pairs.Statuses["succeeded"] != n {
		t.Fatalf("mcp_pairs.py: statuses %v", res.Pairs.Statuses)
	}
	return time.Duration(res.Pairs.Pair.Median * float64(time.Millisecond))
}
