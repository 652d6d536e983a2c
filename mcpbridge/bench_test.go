package mcpbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestBenchBridge measures, in one run and against baselines from the same
// run: terminal_plan(pwd) + terminal_execute (signed receipt included) over
// streamable HTTP versus a bare fork/exec of /bin/true; and the stdio
// bridge's cold start (process start to the first tools/list answer) versus
// starting a trivial Go binary. Run with TERMD_BENCH=1; it prints ratios.
// TERMD_BENCH_BASELINE_MCP=PATH (a termd-mcp built from another commit)
// adds the same-run comparison with it: cold starts alternate with it, and
// the pairs run in alternating rounds on both bridges.
func TestBenchBridge(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the bridge benchmark")
	}
	// TERMD_BENCH_PROFILES=DIR: CPU profiles of termd and the bridge
	// during the mcp_pairs.py runs (profilePair).
	var termdPprof, bridgePprof string
	if os.Getenv("TERMD_BENCH_PROFILES") != "" {
		termdPprof, bridgePprof = freeLoopback(t), freeLoopback(t)
	}
	needRoot(t)
	d := harness.Start(t, harness.Options{Config: agentConfig, AskWrites: true, Args: []string{"--console-url", consoleURL}, Env: []string{"TERMD_DEBUG_PPROF=" + termdPprof}})
	ctx := context.Background()
	const pairs = 200

	// Baseline: fork/exec of /bin/true.
	trueTimes := make([]time.Duration, 0, pairs)
	for range pairs {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Fatal(err)
		}
		trueTimes = append(trueTimes, time.Since(start))
	}

	directTimes := benchDaemonAlone(t, ctx, d, pairs, trueTimes)

	// plan + execute over streamable HTTP (protocol 2026-07-28, stateless).
	hb := startHTTPBridgeProfiled(t, d, bridgePprof)
	benchHTTPPairs(t, ctx, hb, pairs, trueTimes, directTimes)

	// Cold start over stdio versus a trivial Go binary.
	dir, floorDir, floorBin := buildColdStartBinaries(t)
	const starts = 30
	var listed []*mcp.Tool
	coldStart := func(cmd *exec.Cmd) time.Duration {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		start := time.Now()
		cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		cs.Close()
		listed = res.Tools
		return took
	}
	// The floor again, its tools/list answer carrying termd-mcp's tools
	// (MCPFLOOR_TOOLS): what serving and decoding that answer costs apart
	// from anything termd-mcp does.
	coldStart(bridgeCmd(t, d, nil))
	toolsFile := filepath.Join(floorDir, "tools.json")
	if data, err := json.Marshal(listed); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(toolsFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Alternate, so that load from elsewhere hits all of them alike.
	baseline := os.Getenv("TERMD_BENCH_BASELINE_MCP")
	var trivial, floor, floorTools, cold, base []time.Duration
	for range starts {
		start := time.Now()
		if err := exec.Command(filepath.Join(dir, "trivial")).Run(); err != nil {
			t.Fatal(err)
		}
		trivial = append(trivial, time.Since(start))
		fc := bridgeCmd(t, d, nil)
		fc.Path, fc.Args = floorBin, []string{floorBin}
		floor = append(floor, coldStart(fc))
		ft := bridgeCmd(t, d, nil)
		ft.Path, ft.Args = floorBin, []string{floorBin}
		ft.Env = append(ft.Env, "MCPFLOOR_TOOLS="+toolsFile)
		floorTools = append(floorTools, coldStart(ft))
		cold = append(cold, coldStart(bridgeCmd(t, d, nil)))
		if baseline != "" {
			bc := bridgeCmd(t, d, nil)
			bc.Path, bc.Args = baseline, []string{baseline}
			base = append(base, coldStart(bc))
		}
	}
	report(t, "stdio cold start to first tools/list", cold, "start of a trivial Go binary", trivial, 4)
	harness.BenchLine(t, "mcp: stdio cold start to first tools/list", cold, "start of a trivial Go binary", trivial, 4)
	harness.BenchLine(t, "mcp: stdio cold start to first tools/list", cold, "the floor (go-sdk + gRPC init, one hand-written tool)", floor, 0)
	harness.BenchLine(t, "mcp: the floor's cold start", floor, "start of a trivial Go binary", trivial, 0)
	harness.BenchLine(t, fmt.Sprintf("mcp: stdio cold start to first tools/list (%d tools)", len(listed)), cold, "the floor listing the same tools", floorTools, 0)
	harness.BenchLine(t, "mcp: the floor listing termd-mcp's tools, cold start", floorTools, "start of a trivial Go binary", trivial, 0)
	if baseline != "" {
		harness.BenchLine(t, "mcp: stdio cold start to first tools/list", cold, "the baseline termd-mcp", base, 0)
		harness.BenchLine(t, "mcp: the baseline's cold start", base, "start of a trivial Go binary", trivial, 0)
	}

	benchPairsScript(t, d, hb, termdPprof)
	if baseline != "" {
		benchPairsBaseline(t, hb, startHTTPBridgeBin(t, d, baseline, ""))
	}
}

// benchDaemonAlone times plan + execute + receipt straight over gRPC, pairs
// times, against fork/exec of /bin/true, and returns the pairs' times.
func benchDaemonAlone(t *testing.T, ctx context.Context, d *harness.Daemon, pairs int, trueTimes []time.Duration) []time.Duration {
	// The daemon's own share: the same pair straight over gRPC (as the
	// operator; CreatePlan + ExecuteAndWait to the signed receipt), with no
	// bridge, so the bridge's overhead can be told apart.
	sess, err := d.Client.Sessions.CreateSession(ctx, &termdv1.CreateSessionRequest{Label: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	direct := func() time.Duration {
		start := time.Now()
		p, err := d.Client.Plans.CreatePlan(ctx, &termdv1.CreatePlanRequest{SessionId: sess.GetSession().GetId(), Request: &termdv1.CommandRequest{Argv: []string{"pwd"}, Cwd: d.Workspace}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := d.Client.Executions.ExecuteAndWait(ctx, &termdv1.ExecuteAndWaitRequest{PlanId: p.GetPlan().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := st.Recv(); err != nil {
				break
			}
		}
		if _, err := d.Client.Receipts.GetReceipt(ctx, &termdv1.GetReceiptRequest{SessionId: sess.GetSession().GetId()}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	for range 10 {
		direct()
	}
	var directTimes []time.Duration
	for range pairs {
		directTimes = append(directTimes, direct())
	}
	report(t, "daemon alone (gRPC plan+execute-and-wait+receipt)", directTimes, "fork/exec /bin/true", trueTimes, 2.5)
	return directTimes
}

// benchHTTPPairs times terminal_plan + terminal_execute through the HTTP
// bridge hb, pairs times, against /bin/true and the daemon alone.
func benchHTTPPairs(t *testing.T, ctx context.Context, hb *httpBridge, pairs int, trueTimes, directTimes []time.Duration) {
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hb.URL, HTTPClient: &http.Client{Transport: bearer{hb.Token, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() }) // open until the test ends
	pair := func() (plan, execute time.Duration) {
		start := time.Now()
		p, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"pwd"}}, false)
		if res.IsError || str(p, "state") != "planned" {
			t.Fatalf("plan: %s", text(res))
		}
		mid := time.Now()
		ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(p, "plan_id")}, false)
		if res.IsError || str(ex, "state") != "succeeded" || str(ex, "receipt_id") == "" {
			t.Fatalf("execute: %s", text(res))
		}
		return mid.Sub(start), time.Since(mid)
	}
	for range 10 { // warm up
		pair()
	}
	var pairTimes, planTimes, execTimes []time.Duration
	for range pairs {
		p, e := pair()
		planTimes, execTimes, pairTimes = append(planTimes, p), append(execTimes, e), append(pairTimes, p+e)
	}
	report(t, "plan+execute over HTTP", pairTimes, "fork/exec /bin/true", trueTimes, 2.5)
	t.Logf("  of which terminal_plan median %v, terminal_execute median %v; the bridge adds %v to the daemon's median", pct(planTimes, 50), pct(execTimes, 50), pct(pairTimes, 50)-pct(directTimes, 50))
}

// buildColdStartBinaries builds a trivial Go binary (in dir) and the floor
// MCP server (floorBin, in floorDir, which nobody, the bridge's user, can reach).
func buildColdStartBinaries(t *testing.T) (dir, floorDir, floorBin string) {
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module trivial\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", "trivial", ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the trivial binary: %v\n%s", err, out)
	}
	// The floor: the SDK, gRPC and the generated API initialised and an MCP
	// server with one hand-written tool answering (bench/mcpfloor).
	floorDir, err := os.MkdirTemp("", "mcpfloor-") // the floor runs as the bridge does (nobody)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(floorDir) })
	_ = os.Chmod(floorDir, 0o755)
	floorBin = filepath.Join(floorDir, "mcpfloor")
	fb := exec.Command("go", "build", "-tags", harness.BuildTags, "-o", floorBin, "./bench/mcpfloor")
	fb.Dir = ".."
	if out, err := fb.CombinedOutput(); err != nil {
		t.Fatalf("building the floor binary: %v\n%s", err, out)
	}
	return dir, floorDir, floorBin
}

// benchPairsScript drives the bridge with the plain-Python MCP client that
// measured the seed implementation (MCP_PAIRS, default
// /work/shared/bench/mcp_pairs.py), in the stateless 2026-07-28 form and the
// stateful 2025-11-25 form, against the durable floor measured in the same
// run, and reports the server CPU (termd + bridge, from /proc) per pair.
func benchPairsScript(t *testing.T, d *harness.Daemon, hb *httpBridge, termdPprof string) {
	script, err := pairsScript()
	if err != nil {
		harness.Bench(t, "mcp: pairs over HTTP not measured: "+err.Error()+" (set MCP_PAIRS to mcp_pairs.py)")
		return
	}
	const n, warmup = 200, 10
	floor := harness.Floor(t, d.StateDir, n/2)
	for _, era := range []string{"modern", "legacy"} {
		d0 := harness.CPUTime(d.Pid())
		saveProfiles := profilePair(t, era, hb.pprof, termdPprof)
		res, bCPU := runPairs(t, script, hb, era, n, warmup)
		saveProfiles()
		dCPU := harness.CPUTime(d.Pid()) - d0
		floor = append(floor, harness.Floor(t, d.StateDir, n/4)...)
		fm := harness.Pct(floor, 50)
		ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
		name := map[string]string{"modern": "stateless 2026-07-28", "legacy": "stateful 2025-11-25"}[era]
		harness.Bench(t, fmt.Sprintf("mcp: HTTP terminal_plan pwd + terminal_execute, %s (mcp_pairs.py): median %v (p90 %v, first %v) vs floor median %v: ratio %.2fx (target <= 1.6x)",
			name, ms(res.Pairs.Pair.Median), ms(res.Pairs.Pair.P90), ms(res.Pairs.First), fm.Round(10*time.Microsecond), float64(ms(res.Pairs.Pair.Median))/float64(fm)))
		pairs := time.Duration(n + warmup)
		perPair := (dCPU + bCPU) / pairs
		harness.Bench(t, fmt.Sprintf("mcp:   server CPU per pair %v (termd %v + bridge %v) = %.0f%% of the pair's median wall time",
			perPair.Round(10*time.Microsecond), (dCPU/pairs).Round(10*time.Microsecond), (bCPU/pairs).Round(10*time.Microsecond), 100*float64(perPair)/float64(ms(res.Pairs.Pair.Median))))
	}
}

// pairsScript is mcp_pairs.py: MCP_PAIRS, by default /work/shared/bench/mcp_pairs.py.
func pairsScript() (string, error) {
	script := os.Getenv("MCP_PAIRS")
	if script == "" {
		script = "/work/shared/bench/mcp_pairs.py"
	}
	_, err := os.Stat(script)
	return script, err
}

// pairsResult is what mcp_pairs.py says of one series.
type pairsResult struct {
	Pairs struct {
		First float64 `json:"first_pair_ms"`
		Pair  struct {
			Median float64 `json:"median_ms"`
			P90    float64 `json:"p90_ms"`
		} `json:"pair"`
		Statuses map[string]int `json:"receipt_statuses"`
	} `json:"pairs"`
}

// runPairs runs n (+ warmup) plan+execute pairs of one era with
// mcp_pairs.py against hb and returns its result and the CPU the bridge
// used meanwhile.
func runPairs(t *testing.T, script string, hb *httpBridge, era string, n, warmup int) (pairsResult, time.Duration) {
	t.Helper()
	u, err := url.Parse(hb.URL)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", script, "pairs", "--port", u.Port(), "--era", era, "--n", fmt.Sprint(n), "--warmup", fmt.Sprint(warmup))
	cmd.Env = append(os.Environ(), "MCP_BENCH_PATH="+u.Path, "MCP_BENCH_TOKEN="+hb.Token)
	b0 := harness.ThreadsCPU(hb.cmd.Process.Pid)
	out, err := cmd.Output()
	bCPU := harness.ThreadsCPU(hb.cmd.Process.Pid) - b0
	if err != nil {
		t.Fatalf("mcp_pairs.py %s: %v\n%s", era, err, out)
	}
	var res pairsResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("mcp_pairs.py %s: %v\n%s", era, err, out)
	}
	if res.Pairs.Statuses["succeeded"] != n {
		t.Fatalf("mcp_pairs.py %s: statuses %v", era, res.Pairs.Statuses)
	}
	return res, bCPU
}

// benchPairsBaseline compares the bridge's CPU per pair with a baseline
// bridge's (TERMD_BENCH_BASELINE_MCP) in alternating rounds of pairs.
func benchPairsBaseline(t *testing.T, hb, base *httpBridge) {
	script, err := pairsScript()
	if err != nil {
		return // benchPairsScript said so
	}
	const rounds, n, warmup = 6, 40, 2
	for _, era := range []string{"modern", "legacy"} {
		var cpu [2]time.Duration
		for r := range rounds {
			for k := range 2 {
				i := (r + k) % 2
				_, c := runPairs(t, script, []*httpBridge{hb, base}[i], era, n, warmup)
				cpu[i] += c
			}
		}
		pairs := time.Duration(rounds * (n + warmup))
		harness.Bench(t, fmt.Sprintf("mcp:   bridge CPU per pair, %s, alternating rounds: %v vs the baseline termd-mcp %v: ratio %.2fx",
			era, (cpu[0]/pairs).Round(10*time.Microsecond), (cpu[1]/pairs).Round(10*time.Microsecond), float64(cpu[0])/float64(cpu[1])))
	}
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func report(t *testing.T, what string, got []time.Duration, base string, baseline []time.Duration, target float64) {
	t.Helper()
	for _, p := range []int{50, 90} {
		g, b := pct(got, p), pct(baseline, p)
		t.Logf("%s p%d %v vs %s p%d %v: ratio %.2fx (target <= %.1fx)", what, p, g, base, p, b, float64(g)/float64(b), target)
	}
}

// profilePair, with TERMD_BENCH_PROFILES=DIR, takes CPU profiles of the
// bridge and of termd (each served on TERMD_DEBUG_PPROF) while one era's
// pairs run, and the returned func writes them to DIR/bridge-ERA.pb.gz and
// DIR/termd-ERA.pb.gz (go tool pprof FILE).
func profilePair(t *testing.T, era string, addrs ...string) func() {
	dir := os.Getenv("TERMD_BENCH_PROFILES")
	if dir == "" {
		return func() {}
	}
	names := []string{"bridge", "termd"}
	got := make([]chan []byte, len(addrs))
	for i, addr := range addrs {
		got[i] = make(chan []byte, 1)
		go func() {
			var body []byte
			if resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=" + profileSeconds()); err == nil {
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			got[i] <- body
		}()
	}
	return func() {
		for i := range addrs {
			if err := os.WriteFile(filepath.Join(dir, names[i]+"-"+era+".pb.gz"), <-got[i], 0o644); err != nil {
				t.Error(err)
			}
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

func profileSeconds() string {
	if s := os.Getenv("TERMD_BENCH_PROFILE_SECONDS"); s != "" {
		return s
	}
	return "5"
}
