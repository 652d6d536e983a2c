package mcpbridge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

type guaranteePart struct {
	harness.ProfileRule
	why string // the guarantee a user would name; "" where the floor does the same
}

// guaranteeParts splits termd's own CPU (its threads; a Go CPU profile)
// by what the work is for. A sample goes to the first part, in this
// order, that any frame of its stack names.
var guaranteeParts = []guaranteePart{
	{harness.ProfileRule{Name: "receipt signing", Prefixes: []string{
		"github.com/termd/termd/receipt.", "github.com/termd/termd/daemon/receiptstore.(*Keys).Sign",
		"github.com/termd/termd/daemon/receiptstore.SignShare", "github.com/termd/termd/daemon/broker/receiptq.",
		"github.com/termd/termd/daemon/server.receiptJSON"}},
		"every command proven by a signed receipt (ed25519 + HMAC, schema-checked; the share form the agent gets)"},
	{harness.ProfileRule{Name: "plan journal", Prefixes: []string{
		"github.com/termd/termd/daemon/broker/journal.", "github.com/termd/termd/daemon/broker.(*Broker).journal"}},
		"a plan or approval is never lost by a crash"},
	{harness.ProfileRule{Name: "policy decision", Prefixes: []string{
		"github.com/termd/termd/daemon/policy.", "github.com/termd/termd/daemon/broker.(*Broker).decide",
		"github.com/termd/termd/daemon/broker.(*Broker).recheck", "github.com/termd/termd/daemon/broker/projects."}},
		"every command decided by a policy that understands it, again at execute (a stale plan is refused)"},
	{harness.ProfileRule{Name: "storage bounds", Prefixes: []string{"github.com/termd/termd/daemon/broker/hostfs.(*FS).StorageAllows"}},
		"no agent fills the disk (each principal's stored output is bounded per day)"},
	{harness.ProfileRule{Name: "sandbox: spec", Prefixes: []string{
		"github.com/termd/termd/daemon/sandbox.", "github.com/termd/termd/daemon/broker/executions.",
		"github.com/termd/termd/daemon/broker/hostfs."}},
		"the command is confined by the kernel (Landlock rules, mounts, seccomp, private HOME/TMPDIR)"},
	{harness.ProfileRule{Name: "sandbox: pools", Prefixes: []string{
		"github.com/termd/termd/daemon/runner/pool.", "github.com/termd/termd/daemon/runner/cgroup."}},
		"its own network namespace, cgroup and a pre-started confined launcher, each checked pristine on reuse"},
	{harness.ProfileRule{Name: "durable store", Prefixes: []string{
		"github.com/termd/termd/daemon/receiptstore.", "modernc.org/", "database/sql."}},
		""},
	{harness.ProfileRule{Name: "events and streams", Prefixes: []string{
		"github.com/termd/termd/daemon/events.", "github.com/termd/termd/daemon/broker/sessions."}},
		"live output and state to every watching client (the floor returns output only at the end)"},
	{harness.ProfileRule{Name: "exec, output, exit", Prefixes: []string{"github.com/termd/termd/daemon/runner."}}, ""},
	{harness.ProfileRule{Name: "gRPC and protobuf", Prefixes: []string{
		"google.golang.org/grpc", "golang.org/x/net/http2", "google.golang.org/protobuf", "github.com/termd/termd/daemon/server."}},
		""},
	{harness.ProfileRule{Name: "garbage collection", Prefixes: []string{
		"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}},
		""},
	{harness.ProfileRule{Name: "Go scheduler", Prefixes: []string{"runtime.mcall", "runtime.schedule", "runtime.findRunnable", "runtime.park_m"}},
		""},
}

// TestBenchGuarantees accounts for termd's CPU per MCP `pwd` pair against
// the floor's (bench/floor), part by part, in one run: the floor, termd
// (the sandbox required) and termd with `sandbox: off` take turns for
// TERMD_BENCH_ROUNDS (default 4) rounds of TERMD_BENCH_PAIRS (default 250)
// modern pairs each; termd's daemon is CPU-profiled through each of its
// rounds after the first (the first sizes the profile window). It prints
// CPU per pair of each side's processes (daemon threads, their reaped
// children, the MCP server), and termd's daemon CPU per pair split by
// guaranteeParts, each with the guarantee it buys (with
// TERMD_BENCH_BASE=DIR, DIR's termd with `sandbox: off` takes its turns
// too, "base-nosb", a before/after of termd-nosb); then the same for
// latency (latencyTable): each side's plan and execute call medians as the
// client saw them, set against termd's /debug/stages and the floor
// broker's steps, each part with the guarantee it buys. Run with
// TERMD_BENCH=1; nothing here is asserted on time.
func TestBenchGuarantees(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the guarantees benchmark")
	}
	needRoot(t)
	rounds, per := envInt("TERMD_BENCH_ROUNDS", 4), envInt("TERMD_BENCH_PAIRS", 250)
	t.Setenv("TERMD_BENCH_POOLS", "1") // a debug listener for termd, without finer heap sampling
	sides := []*server{startFloor(t, t.TempDir()), startBenchTermd(t, "termd", "", "", "", ""), startBenchTermd(t, "termd-nosb", "sandbox: \"off\"\n", "", "", "")}
	if base := os.Getenv("TERMD_BENCH_BASE"); base != "" { // an A/B of sandbox: off in the same run
		sides = append(sides, startBenchTermd(t, "base-nosb", "sandbox: \"off\"\n", filepath.Join(base, "termd"), "", ""))
	}
	type use struct{ daemon, children, mcp time.Duration }
	split := func(s *server) use {
		return use{harness.ThreadsCPU(s.pids[0]), harness.ChildrenCPU(s.pids[0]), harness.ThreadsCPU(s.pids[1]) + harness.ChildrenCPU(s.pids[1])}
	}
	total := make([]use, len(sides))
	calls := make([][][2]time.Duration, len(sides)) // each side's modern pairs: plan call, execute call
	var profiled use
	var profPairs int
	parts := map[string]int64{}
	var profTotal int64
	window := 0 // seconds: termd's last round, rounded up
	for r := range rounds {
		for k := range sides {
			s := sides[(r+k)%len(sides)]
			var prof chan string
			if s.name == "termd" && window > 0 {
				prof = make(chan string, 1)
				go func() { prof <- fetch(t, "http://"+s.debug+"/debug/pprof/profile?seconds="+strconv.Itoa(window)) }()
				time.Sleep(100 * time.Millisecond) // the profile has started
			}
			u0, w0 := split(s), time.Now()
			if _, failed := s.series(t, "modern", per, 3); failed > 0 {
				t.Errorf("%s: %d failed pairs", s.name, failed)
			}
			u1 := split(s)
			d := use{u1.daemon - u0.daemon, u1.children - u0.children, u1.mcp - u0.mcp}
			i := (r + k) % len(sides)
			calls[i] = append(calls[i], s.phases...)
			total[i] = use{total[i].daemon + d.daemon, total[i].children + d.children, total[i].mcp + d.mcp}
			if s.name != "termd" {
				continue
			}
			window = int(time.Since(w0).Seconds()) + 1
			if prof == nil {
				continue
			}
			p, err := harness.ParseCPUProfile([]byte(<-prof))
			if err != nil {
				t.Fatal(err)
			}
			rules := make([]harness.ProfileRule, len(guaranteeParts))
			for i, g := range guaranteeParts {
				rules[i] = g.ProfileRule
			}
			for name, ns := range p.Attribute(rules) {
				parts[name] += ns
			}
			profTotal += p.Total
			profiled = use{profiled.daemon + d.daemon, profiled.children + d.children, profiled.mcp + d.mcp}
			profPairs += 2 * (per + 3)
		}
	}
	np := time.Duration(2 * (per + 3) * rounds)
	harness.Bench(t, fmt.Sprintf("guarantees: CPU per modern pwd pair over %d rounds of %d pairs a side (the broker/daemon's threads, the children it reaped, the MCP server)", rounds, per))
	for i, s := range sides {
		u := total[i]
		harness.Bench(t, fmt.Sprintf("guarantees: %-10s %v = daemon %v + children %v + MCP server %v (%.2fx the floor)", s.name, ms((u.daemon+u.children+u.mcp)/np), ms(u.daemon/np), ms(u.children/np), ms(u.mcp/np), ratio(u.daemon+u.children+u.mcp, total[0].daemon+total[0].children+total[0].mcp)))
	}
	if profTotal == 0 || profPairs == 0 {
		t.Fatalf("no profile of termd was taken (rounds %d): run at least 2 rounds", rounds)
	}
	perPair := profiled.daemon / time.Duration(profPairs)
	harness.Bench(t, fmt.Sprintf("guarantees: termd's daemon CPU per pair %v, split by its CPU profile (%v of samples over %d pairs):", ms(perPair), time.Duration(profTotal).Round(time.Millisecond), profPairs))
	for _, g := range append(guaranteeParts, guaranteePart{harness.ProfileRule{Name: "other"}, ""}) {
		share := float64(parts[g.Name]) / float64(profTotal)
		why := g.why
		if why == "" {
			why = "(the floor does this too)"
		}
		harness.Bench(t, fmt.Sprintf("guarantees:   %-20s %5.1f%% %9v  %s", g.Name, 100*share, ms(time.Duration(share*float64(perPair))), why))
	}
	sb, nosb := total[1].children/np, total[2].children/np
	harness.Bench(t, fmt.Sprintf("guarantees: the sandbox in the children: %v per pair (children %v sandboxed vs %v with sandbox: off; the floor's %v)", ms(sb-nosb), ms(sb), ms(nosb), ms(total[0].children/np)))
	latencyTable(t, sides, calls)
}
