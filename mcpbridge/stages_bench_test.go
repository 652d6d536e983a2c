package mcpbridge_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// TestBenchStages is the daemon's hot path per MCP pair (terminal_plan pwd +
// terminal_execute over streamable HTTP, driven by mcp_pairs.py): the pair's
// median, the server CPU per pair (termd + the bridge + the children they
// reaped) and termd's own /debug/stages, against baselines measured in the
// same process and run: a bare 4 KiB append + fdatasync (what each of the
// intent and the receipt commits cannot avoid) and a bare fork/exec of
// /bin/pwd, the same command (what the spawn and exit stages cannot avoid). With
// TERMD_BENCH_ARCHFLOOR=PATH (a floor binary built outside the project, e.g.
// ../shared/bench/archfloor) its pairs run in rounds alternating with
// termd's, and the ratios are printed. TERMD_BENCH_ROUNDS (default 4) and
// TERMD_BENCH_PAIRS (per round, default 100) size the run. It prints the
// bytes and objects termd allocated per pair; TERMD_BENCH_PROFILES=DIR
// writes termd's CPU profile and its heap profiles before and after the
// rounds there, sampled finer with TERMD_BENCH_MEMPROFILERATE=BYTES. Run
// with TERMD_BENCH=1; nothing here is asserted on time.
func TestBenchStages(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the stage benchmark")
	}
	needRoot(t)
	script, err := pairsScript()
	if err != nil {
		t.Skip("mcp_pairs.py not found: set MCP_PAIRS")
	}
	rounds, n := 4, 100
	for name, v := range map[string]*int{"TERMD_BENCH_ROUNDS": &rounds, "TERMD_BENCH_PAIRS": &n} {
		if x, err := strconv.Atoi(os.Getenv(name)); err == nil && x > 0 {
			*v = x
		}
	}
	const warmup = 5
	load0 := loadAvg()
	stagesAddr := freeLoopback(t)
	env := []string{"TERMD_DEBUG_PPROF=" + stagesAddr}
	if r := os.Getenv("TERMD_BENCH_MEMPROFILERATE"); r != "" {
		// A heap profile fine enough to read per pair (4096, say); the
		// sampling costs CPU, which then shows in the CPU profile.
		env = append(env, "GODEBUG=memprofilerate="+r)
	}
	d := harness.Start(t, harness.Options{Config: agentConfig, AskWrites: true, Args: []string{"--console-url", consoleURL}, Env: env})
	hb := startHTTPBridge(t, d)
	u, err := url.Parse(hb.URL)
	if err != nil {
		t.Fatal(err)
	}
	sides := []*benchSide{{name: "termd", port: u.Port(), path: u.Path, token: hb.Token, pids: []int{d.Pid(), hb.cmd.Process.Pid}}}
	if bin := os.Getenv("TERMD_BENCH_ARCHFLOOR"); bin != "" {
		sides = append(sides, startArchfloor(t, bin, d.Workspace))
	}
	var appendSync, forkExec []time.Duration
	heap0 := fetch(t, "http://"+stagesAddr+"/debug/pprof/heap?debug=0")
	allocs0 := termdAllocs(t, stagesAddr)
	if dir := os.Getenv("TERMD_BENCH_PROFILES"); dir != "" {
		// termd's heap profiles before and after the rounds (go tool pprof
		// -sample_index=alloc_space -diff_base termd-heap0.pb.gz termd-heap.pb.gz).
		defer func() {
			heap1 := fetch(t, "http://"+stagesAddr+"/debug/pprof/heap?debug=0")
			for name, b := range map[string]string{"termd-heap0.pb.gz": heap0, "termd-heap.pb.gz": heap1} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
					t.Error(err)
				}
			}
		}()
		// termd's CPU profile over the first rounds (go tool pprof FILE).
		prof := make(chan string, 1)
		go func() { prof <- fetch(t, "http://"+stagesAddr+"/debug/pprof/profile?seconds="+profileSeconds()) }()
		defer func() {
			if err := os.WriteFile(filepath.Join(dir, "termd-stages.pb.gz"), []byte(<-prof), 0o644); err != nil {
				t.Error(err)
			}
		}()
	}
	for r := range rounds {
		for k := range sides {
			s := sides[(r+k)%len(sides)]
			c0 := cpuOf(s.pids)
			cmd := exec.Command("python3", script, "pairs", "--port", s.port, "--era", "modern", "--n", fmt.Sprint(n), "--warmup", fmt.Sprint(warmup))
			cmd.Env = append(os.Environ(), "MCP_BENCH_PATH="+s.path, "MCP_BENCH_TOKEN="+s.token)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("mcp_pairs.py against %s: %v\n%s", s.name, err, out)
			}
			c1 := cpuOf(s.pids)
			for i := range c1 {
				s.cpu[i] += c1[i] - c0[i]
			}
			s.pairs += n + warmup
			var res pairsResult
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("mcp_pairs.py against %s: %v\n%s", s.name, err, out)
			}
			if res.Pairs.Statuses["succeeded"] != n {
				t.Fatalf("mcp_pairs.py against %s: statuses %v", s.name, res.Pairs.Statuses)
			}
			s.medians = append(s.medians, time.Duration(res.Pairs.Pair.Median*float64(time.Millisecond)))
		}
		appendSync = append(appendSync, bareAppendSync(t, d.StateDir, n/4)...)
		forkExec = append(forkExec, bareForkExec(t, n/4)...)
	}
	stages := fetch(t, "http://"+stagesAddr+"/debug/stages")
	allocs1 := termdAllocs(t, stagesAddr)
	load1 := loadAvg()

	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
	as, fe := harness.Pct(appendSync, 50), harness.Pct(forkExec, 50)
	harness.Bench(t, fmt.Sprintf("stages: same-run baselines: append 4 KiB + fdatasync median %s, fork/exec /bin/pwd median %s; load average %s -> %s", ms(as), ms(fe), load0, load1))
	for _, s := range sides {
		per := func(d time.Duration) string { return ms(d / time.Duration(s.pairs)) }
		harness.Bench(t, fmt.Sprintf("stages: %s: MCP pair median per round %v; server CPU per pair %s (daemon %s + its reaped children %s + MCP server %s)",
			s.name, roundMs(s.medians), per(s.total()), per(s.cpu[0]), per(s.cpu[1]), per(s.cpu[2])))
	}
	harness.Bench(t, fmt.Sprintf("stages: termd allocated per pair %.1f KiB in %.0f objects (runtime.MemStats TotalAlloc, Mallocs)",
		float64(allocs1[0]-allocs0[0])/1024/float64(sides[0].pairs), float64(allocs1[1]-allocs0[1])/float64(sides[0].pairs)))
	if len(sides) == 2 {
		var ratios []string
		for r := range rounds {
			ratios = append(ratios, fmt.Sprintf("%.2fx", float64(sides[0].medians[r])/float64(sides[1].medians[r])))
		}
		harness.Bench(t, fmt.Sprintf("stages: termd / floor: pair median per round %s; server CPU per pair %.2fx",
			strings.Join(ratios, " "), float64(sides[0].total())/float64(sides[0].pairs)/(float64(sides[1].total())/float64(sides[1].pairs))))
	}
	for _, l := range strings.Split(strings.TrimSpace(stages), "\n") {
		harness.Bench(t, "stages: "+l)
	}
}

// benchSide is one server under TestBenchStages.
type benchSide struct {
	name    string
	port    string
	path    string
	token   string
	pids    []int // the daemon side, then the MCP side: whose CPU counts
	medians []time.Duration
	cpu     [3]time.Duration // the daemon's own, its reaped children's, the MCP side's (with its children's)
	pairs   int
}

func (s *benchSide) total() time.Duration { return s.cpu[0] + s.cpu[1] + s.cpu[2] }

// startArchfloor starts an archfloor binary's gRPC side and MCP side, the
// commands run in workspace.
func startArchfloor(t *testing.T, bin, workspace string) *benchSide {
	dir := t.TempDir()
	sock := filepath.Join(dir, "floor.sock")
	grpcd := exec.Command(bin, "grpcd", sock, dir)
	grpcd.Dir = workspace
	if err := grpcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = grpcd.Process.Kill(); _ = grpcd.Wait() })
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	addr := freeLoopback(t)
	const token = "floor-token"
	mcpSide := exec.Command(bin, "mcp", sock, addr, token)
	mcpSide.Dir = workspace
	if err := mcpSide.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mcpSide.Process.Kill(); _ = mcpSide.Wait() })
	for i := 0; i < 500; i++ {
		if resp, err := http.Get("http://" + addr + "/"); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, port, _ := strings.Cut(addr, ":")
	return &benchSide{name: "floor", port: port, path: "/", token: token, pids: []int{grpcd.Process.Pid, mcpSide.Process.Pid}}
}

// bareAppendSync is n appends of 4 KiB to a file in dir, each fdatasynced.
func bareAppendSync(t *testing.T, dir string, n int) []time.Duration {
	f, err := os.OpenFile(filepath.Join(dir, "bench-append.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		if _, err := f.Write(block); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil { // fsync: at least an fdatasync's work
			t.Fatal(err)
		}
		out[i] = time.Since(start)
	}
	return out
}

// bareForkExec is n fork/execs of /bin/pwd, each waited for.
func bareForkExec(t *testing.T, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		cmd := exec.Command("/bin/pwd")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"} // as the harness's daemon passes on
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		out[i] = time.Since(start)
	}
	return out
}

// cpuOf is the CPU used so far by the daemon side pids[0] (its threads', to
// the nanosecond; the children it reaped, in ticks) and by the MCP side
// pids[1] with its reaped children.
func cpuOf(pids []int) [3]time.Duration {
	reaped := func(pid int) time.Duration { return procCPU(pid, true) - procCPU(pid, false) }
	return [3]time.Duration{harness.ThreadsCPU(pids[0]), reaped(pids[0]), harness.ThreadsCPU(pids[1]) + reaped(pids[1])}
}

func roundMs(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)))
	}
	return "[" + strings.Join(s, " ") + "] ms"
}

// poolsDebug is a TERMD_DEBUG_PPROF address for a benchmarked termd when
// TERMD_BENCH_POOLS=1 (poolsLine then reads its spawn pools' counts), else
// "" (the endpoint samples mutex and block profiles, which costs CPU).
func poolsDebug(t *testing.T) string {
	if os.Getenv("TERMD_BENCH_POOLS") != "1" {
		return ""
	}
	return freeLoopback(t)
}

// poolsLine is the spawn pools' line of termd's /debug/stages at addr (a
// build that has one; "" without addr).
func poolsLine(t *testing.T, addr string) string {
	if addr == "" {
		return ""
	}
	for _, l := range strings.Split(fetch(t, "http://"+addr+"/debug/stages"), "\n") {
		if strings.HasPrefix(l, "spawn pools: ") {
			return l
		}
	}
	return ""
}

// termdAllocs is the bytes and the objects termd at the debug address addr
// has allocated so far (its heap profile's MemStats TotalAlloc and Mallocs).
func termdAllocs(t *testing.T, addr string) [2]uint64 {
	var out [2]uint64
	for _, l := range strings.Split(fetch(t, "http://"+addr+"/debug/pprof/heap?debug=1"), "\n") {
		for i, key := range []string{"# TotalAlloc = ", "# Mallocs = "} {
			if v, ok := strings.CutPrefix(l, key); ok {
				out[i], _ = strconv.ParseUint(v, 10, 64)
			}
		}
	}
	if out[0] == 0 || out[1] == 0 {
		t.Fatalf("termd's heap profile at %s has no TotalAlloc/Mallocs", addr)
	}
	return out
}

func fetch(t *testing.T, u string) string {
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
