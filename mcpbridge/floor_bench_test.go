package mcpbridge_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// TestBenchFloor holds termd-mcp + termd against the project's floor
// (bench/floor: a go-sdk MCP server whose tools call a gRPC broker over a
// unix socket that appends an intent + fdatasync, fork/execs, appends the
// receipt + fdatasync), both driven by the same Go MCP client over
// streamable HTTP (one kept-alive connection a client, as mcp_pairs.py).
// termd runs twice: as configured by default ("termd": the kernel
// sandbox, required) and with `sandbox: off` ("termd-nosb": the same
// daemon, plans, receipts and fsyncs, the command not confined), so the
// gap to the floor splits into what the sandbox costs and what the
// daemon's own work costs. TERMD_BENCH_BASE=DIR adds a third termd, the
// build in DIR (say main's `go build -o DIR ./cmd/...`), sandboxed, for
// a before/after in one run ("base"), with the termd-mcp in DIR when there
// is one.
//
//   - the `pwd` plan+execute pair, stateless 2026-07-28 ("modern") and
//     stateful 2025-11-25 ("legacy"), in rounds that rotate which side
//     goes first: medians, each termd's ratio to the floor per round, and
//     the servers' CPU per pair (threads of termd + termd-mcp + the
//     children termd reaped, against the floor's two processes + theirs);
//   - 8 and 32 concurrent clients for TERMD_BENCH_SECONDS (default 20) on
//     each: pairs/s, p50, p99, the worst pair and failed pairs, with the
//     load average, and termd's durable writes per commit (group commit:
//     intents and receipts of executions in flight together share an
//     fsync);
//   - peak RSS (VmHWM) of termd + termd-mcp after the rounds and after each
//     concurrency level (and the floor's).
//
// TERMD_BENCH_ROUNDS (default 6) and TERMD_BENCH_PAIRS (default 40 a round
// and era) shorten or lengthen the rounds; TERMD_BENCH_POOLS=1 prints each
// termd's spawn pools' counts (pre-started launchers served, spawns that
// started theirs inline) with the RSS. Nothing is downloaded.
func TestBenchFloor(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the floor benchmark")
	}
	needRoot(t)
	rounds, per, seconds := envInt("TERMD_BENCH_ROUNDS", 6), envInt("TERMD_BENCH_PAIRS", 40), envInt("TERMD_BENCH_SECONDS", 20)
	// TERMD_BENCH_PROFILES=DIR: termd's and termd-mcp's heap profiles
	// after the 32-client run (DIR/termd-heap.pb.gz, DIR/bridge-heap.pb.gz).
	profiles := os.Getenv("TERMD_BENCH_PROFILES")
	var termdPprof, bridgePprof string
	if profiles != "" {
		termdPprof, bridgePprof = freeLoopback(t), freeLoopback(t)
	}
	fl := startFloor(t, t.TempDir())
	sides := []*server{fl, startBenchTermd(t, "termd", "", "", termdPprof, bridgePprof), startBenchTermd(t, "termd-nosb", "sandbox: \"off\"\n", "", "", "")}
	if base := os.Getenv("TERMD_BENCH_BASE"); base != "" {
		if _, err := os.Stat(filepath.Join(base, "termd")); err != nil {
			t.Fatalf("TERMD_BENCH_BASE: %v (a directory holding another termd build, with termd-launch beside it)", err)
		}
		sides = append(sides, startBenchTermd(t, "base", "", filepath.Join(base, "termd"), "", ""))
	}

	harness.Bench(t, fmt.Sprintf("floor: MCP HTTP pwd pair, %d rounds of %d pairs an era, each side in turn (the first side rotates); CPU = threads + reaped children of termd + termd-mcp vs of the floor's broker + MCP server", rounds, per))
	harness.Bench(t, "floor: termd = sandbox required (the default); termd-nosb = sandbox: off; base = TERMD_BENCH_BASE's build; ratios are to the floor of the same round")
	n := len(sides)
	all := make([][2][]time.Duration, n) // side, era
	cpu, pairs := make([]time.Duration, n), make([]int, n)
	for r := range rounds {
		med := make([][2]time.Duration, n)
		rcpu := make([]time.Duration, n)
		l0 := loadavg()
		for k := range n {
			i := (r + k) % n
			s := sides[i]
			c0 := s.cpu()
			for e, era := range []string{"modern", "legacy"} {
				ds, failed := s.series(t, era, per, 3)
				if failed > 0 {
					t.Errorf("%s %s: %d failed pairs", s.name, era, failed)
				}
				med[i][e] = harness.Pct(ds, 50)
				all[i][e] = append(all[i][e], ds...)
			}
			rcpu[i] = s.cpu() - c0
			cpu[i] += rcpu[i]
			pairs[i] += 2 * (per + 3)
		}
		np := time.Duration(2 * (per + 3))
		line := fmt.Sprintf("floor: round %d, load %s:", r+1, l0)
		for e, era := range []string{"modern", "legacy"} {
			line += fmt.Sprintf(" %s floor %v", era, ms(med[0][e]))
			for i := 1; i < n; i++ {
				line += fmt.Sprintf(", %s %v %.2fx", sides[i].name, ms(med[i][e]), ratio(med[i][e], med[0][e]))
			}
			line += ";"
		}
		line += fmt.Sprintf(" CPU/pair floor %v", ms(rcpu[0]/np))
		for i := 1; i < n; i++ {
			line += fmt.Sprintf(", %s %v %.2fx", sides[i].name, ms(rcpu[i]/np), ratio(rcpu[i], rcpu[0]))
		}
		harness.Bench(t, line)
	}
	for e, era := range []string{"modern", "legacy"} {
		f := harness.Pct(all[0][e], 50)
		for i := 1; i < n; i++ {
			m := harness.Pct(all[i][e], 50)
			harness.Bench(t, fmt.Sprintf("floor: %s pair median: %s %v vs floor %v: ratio %.2fx (target <= 1.3x; p90 %v vs %v)", era, sides[i].name, ms(m), ms(f), ratio(m, f), ms(harness.Pct(all[i][e], 90)), ms(harness.Pct(all[0][e], 90))))
		}
	}
	fc := cpu[0] / time.Duration(pairs[0])
	for i := 1; i < n; i++ {
		tc := cpu[i] / time.Duration(pairs[i])
		harness.Bench(t, fmt.Sprintf("floor: server CPU per pair: %s + termd-mcp + children %v vs floor %v: ratio %.2fx (target <= 1.5x)", sides[i].name, ms(tc), ms(fc), ratio(tc, fc)))
	}
	rss := func(when string) {
		for _, s := range sides {
			harness.Bench(t, fmt.Sprintf("floor: peak RSS after %s: %s", when, s.rss()))
			if l := poolsLine(t, s.debug); l != "" { // TERMD_BENCH_POOLS=1
				harness.Bench(t, fmt.Sprintf("floor: after %s, %s %s", when, s.name, l))
			}
		}
	}
	rss("the rounds")

	benchFloorClients(t, sides, seconds, rss)
	saveFloorHeapProfiles(t, profiles, termdPprof, bridgePprof)
	harness.Bench(t, "floor: the seed (term_mcp_deepseek v1.0.0, Python) is not run here; issue 35 measured it, in its own run, at 6.1/6.4 ms a pair, 199 pairs/s p99 100 ms with 8 clients, 156 pairs/s with 32, peak RSS 80 MB")
}

// benchCaps lets 32 clients of one principal each hold a session and run
// one command at a time (the defaults are 8 and 8).
const benchCaps = "sessions:\n  per_principal: 64\n  global: 128\n  max_running: 64\nconnections:\n  calls_per_principal: 128\n"

// startBenchTermd starts a termd (bin, or this tree's with "") with config
// added to the agent configuration, and its termd-mcp over HTTP (the one
// beside bin when there is one). termdPprof and bridgePprof, when set, are
// their debug listeners (profiles sampled finely); without termdPprof,
// termd's debug listener is TERMD_BENCH_POOLS's.
func startBenchTermd(t *testing.T, name, config, bin, termdPprof, bridgePprof string) *server {
	metrics := freeLoopback(t)
	var env []string
	if termdPprof != "" {
		env = append(env, profileRate) // profiles asked for: sample finely
	} else {
		termdPprof = poolsDebug(t) // TERMD_BENCH_POOLS=1: the pool counts, no profile
	}
	env = append(env, "TERMD_DEBUG_PPROF="+termdPprof)
	d := harness.Start(t, harness.Options{Config: agentConfig + benchCaps + "metrics_listen: " + metrics + "\n" + config, Bin: bin, Env: env})
	bridge := "" // this tree's termd-mcp, or the one beside bin (TERMD_BENCH_BASE)
	if b := filepath.Join(filepath.Dir(bin), "termd-mcp"); bin != "" {
		if _, err := os.Stat(b); err == nil {
			bridge = b
		}
	}
	hb := startHTTPBridgeBin(t, d, bridge, bridgePprof)
	return &server{name: name, url: hb.URL, token: hb.Token, pids: []int{d.Pid(), hb.cmd.Process.Pid}, termd: true, metrics: metrics, debug: termdPprof}
}

// benchFloorClients runs 8 and then 32 concurrent clients against each side
// in turn (the floor last) and reports throughput, latency and CPU a pair.
func benchFloorClients(t *testing.T, sides []*server, seconds int, rss func(when string)) {
	n := len(sides)
	for _, clients := range []int{8, 32} {
		for k := range n {
			s := sides[(k+1)%n] // the floor last, as before
			l0, c0 := loadavg(), s.cpu()
			w0, f0 := s.storeWrites()
			res := s.concurrent(t, clients, time.Duration(seconds)*time.Second)
			c := (s.cpu() - c0) / time.Duration(max(1, len(res.ok)))
			w1, f1 := s.storeWrites()
			group := ""
			if f1 > f0 {
				group = fmt.Sprintf(", %.2f durable writes a commit", (w1-w0)/(f1-f0))
			}
			harness.Bench(t, fmt.Sprintf("floor: %2d clients x %ds, %-10s: %6.1f pairs/s, p50 %v, p99 %v, worst %v, %d failed, CPU/pair %v%s; load average %s -> %s",
				clients, seconds, s.name, float64(len(res.ok))/res.wall.Seconds(), ms(harness.Pct(res.ok, 50)), ms(harness.Pct(res.ok, 99)), ms(harness.Pct(res.ok, 100)), res.failed, ms(c), group, l0, loadavg()))
			for i, e := range res.errs {
				t.Logf("%s, %d clients: failure %d of %d: %s", s.name, clients, i+1, res.failed, e)
			}
		}
		rss(fmt.Sprintf("%d clients", clients))
	}
}

// profileRate samples one allocation in every 4 KiB (Go's default: 512
// KiB) in a profiled termd and termd-mcp, so that a heap of a few MB shows
// more than a few dozen samples.
const profileRate = "GODEBUG=memprofilerate=4096"

// saveFloorHeapProfiles writes termd's and termd-mcp's heap profiles to
// TERMD_BENCH_PROFILES (profiles), when it is set, and beside each the
// runtime's memory statistics (NAME-heap.txt: the end of ?debug=1), the
// heap after a collection (NAME-live.pb.gz) and the goroutines
// (NAME-goroutines.txt).
func saveFloorHeapProfiles(t *testing.T, profiles, termdPprof, bridgePprof string) {
	if profiles == "" {
		return
	}
	for name, addr := range map[string]string{"termd": termdPprof, "bridge": bridgePprof} {
		// In this order: the heap as the load left it, then what a
		// collection leaves live, and the goroutines (what holds it).
		for _, f := range [][2]string{{"-heap.pb.gz", "heap"}, {"-heap.txt", "heap?debug=1"}, {"-live.pb.gz", "heap?gc=1"}, {"-goroutines.txt", "goroutine?debug=1"}} {
			file, query := name+f[0], f[1]
			resp, err := http.Get("http://" + addr + "/debug/pprof/" + query)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if query == "heap?debug=1" {
				body = body[max(0, bytes.LastIndex(body, []byte("\n# runtime.MemStats"))):]
			}
			if err := os.WriteFile(filepath.Join(profiles, file), body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func ms(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(max(b, 1)) }

// hwm is VmHWM of pid in MB.
func hwm(pid int) int64 { return harness.StatusKB(pid, "VmHWM") >> 10 }

func serverHWM(s *server) int64 {
	var sum int64
	for _, p := range s.pids {
		sum += hwm(p)
	}
	return sum
}

func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// startFloor builds bench/floor and starts its broker (state beside the
// workspace) and its MCP server (in the workspace, so pwd answers it).
func startFloor(t *testing.T, workspace string) *server {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "floor")
	b := exec.Command("go", "build", "-tags", harness.BuildTags, "-o", bin, "./bench/floor")
	b.Dir = ".."
	if out, err := b.CombinedOutput(); err != nil {
		t.Fatalf("building bench/floor: %v\n%s", err, out)
	}
	sock, state, tok := filepath.Join(dir, "floor.sock"), filepath.Join(dir, "state"), filepath.Join(dir, "token")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tok, []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		c.Dir = workspace
		c.Stderr = os.Stderr
		return c
	}
	br := start("broker", sock, state)
	if err := br.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Process.Kill(); _ = br.Wait() })
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := start("mcp", sock, "127.0.0.1:0", tok)
	out, err := m.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Process.Kill(); _ = m.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the floor's MCP server: %v", err)
	}
	_, url, _ := strings.Cut(strings.TrimSpace(line), "serving ")
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return &server{name: "floor", url: url, token: testToken, pids: []int{br.Process.Pid, m.Process.Pid}, sock: sock}
}

// server is one side of the comparison: its URL and its processes.
type server struct {
	name, url, token string
	pids             []int // termd's sides: termd, termd-mcp
	termd            bool
	metrics          string             // termd's metrics_listen
	debug            string             // termd's TERMD_DEBUG_PPROF (TERMD_BENCH_POOLS=1)
	sock             string             // the floor broker's socket (its Steps method)
	phases           [][2]time.Duration // the last series' pairs: the plan call's time, the execute call's
}

// storeWrites reads termd's receipt store counters (termd_receipt_store_
// writes, _commits); zeros where they are not served (the floor, an older
// build).
func (s *server) storeWrites() (writes, commits float64) {
	if s.metrics == "" {
		return 0, 0
	}
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			switch f[0] {
			case "termd_receipt_store_writes":
				writes, _ = strconv.ParseFloat(f[1], 64)
			case "termd_receipt_store_commits":
				commits, _ = strconv.ParseFloat(f[1], 64)
			}
		}
	}
	return writes, commits
}

// rss says the side's peak RSS (VmHWM) and, for termd, its RSS now.
func (s *server) rss() string {
	if !s.termd {
		return fmt.Sprintf("%s %d MB", s.name, serverHWM(s))
	}
	d, b := s.pids[0], s.pids[1]
	kb := func(pid int, f string) int64 { return harness.StatusKB(pid, f) >> 10 }
	return fmt.Sprintf("%s %d MB + termd-mcp %d MB = %d MB (VmRSS now %d + %d MB, of which the binaries' pages %d + %d MB)", s.name, hwm(d), hwm(b), hwm(d)+hwm(b),
		kb(d, "VmRSS"), kb(b, "VmRSS"), kb(d, "RssFile"), kb(b, "RssFile"))
}

// cpu is the CPU its processes and their reaped children used so far.
func (s *server) cpu() time.Duration {
	var sum time.Duration
	for _, p := range s.pids {
		sum += harness.ThreadsCPU(p) + harness.ChildrenCPU(p)
	}
	return sum
}

// series runs warmup + n pairs on one new client and returns the n pair
// times and how many of all failed.
func (s *server) series(t *testing.T, era string, n, warmup int) ([]time.Duration, int) {
	t.Helper()
	c, err := s.client(era)
	if err != nil {
		t.Fatalf("%s %s: %v", s.name, era, err)
	}
	defer c.close()
	failed := 0
	var ds []time.Duration
	s.phases = s.phases[:0]
	for i := range n + warmup {
		d, err := c.pair()
		if err != nil {
			if failed++; failed <= maxLoggedFailures {
				t.Logf("%s %s: failure %d: %v", s.name, era, failed, err)
			}
			continue
		}
		if i >= warmup {
			ds = append(ds, d)
			s.phases = append(s.phases, c.phases)
		}
	}
	return ds, failed
}

// maxLoggedFailures is how many failed pairs of a concurrent run are
// logged in full.
const maxLoggedFailures = 5

type loadResult struct {
	ok     []time.Duration
	failed int
	errs   []string // the first maxLoggedFailures failures, in full
	wall   time.Duration
}

// concurrent runs clients clients (modern era), each its own connection
// and session, pairing back to back for d.
func (s *server) concurrent(t *testing.T, clients int, d time.Duration) loadResult {
	t.Helper()
	var mu sync.Mutex
	var res loadResult
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.client("modern")
			if err != nil {
				t.Errorf("%s: %v", s.name, err)
				return
			}
			defer c.close()
			var mine []time.Duration
			for time.Now().Before(end) {
				p, err := c.pair()
				if err != nil {
					if failed.Add(1) <= maxLoggedFailures {
						mu.Lock()
						res.errs = append(res.errs, err.Error())
						mu.Unlock()
					}
					continue
				}
				mine = append(mine, p)
			}
			mu.Lock()
			res.ok = append(res.ok, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.failed = int(failed.Load())
	return res
}

// mcpPairs is a plain MCP client over streamable HTTP, one kept-alive
// connection, in the stateless 2026-07-28 form (every request carries
// the protocol version and client data in _meta, and MCP-Protocol-Version,
// Mcp-Method and Mcp-Name headers) or the 2025-11-25 session form
// (initialize, then Mcp-Session-Id).
type mcpPairs struct {
	s       *server
	era     string
	hc      *http.Client
	id      int
	session string           // the MCP session (legacy)
	termd   string           // the session its plans go to (from the first plan)
	phases  [2]time.Duration // the last pair's plan call and execute call
}

func (s *server) client(era string) (*mcpPairs, error) {
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true, DialContext: (&net.Dialer{}).DialContext}
	c := &mcpPairs{s: s, era: era, hc: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
	if era == "legacy" {
		h, _, err := c.post(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "bench", "version": "1"}}}, nil)
		if err != nil {
			return nil, fmt.Errorf("initialize: %w", err)
		}
		if c.session = h.Get("Mcp-Session-Id"); c.session == "" {
			return nil, fmt.Errorf("initialize: no Mcp-Session-Id")
		}
		if _, _, err := c.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}, map[string]string{"Mcp-Session-Id": c.session, "MCP-Protocol-Version": "2025-11-25"}); err != nil {
			return nil, fmt.Errorf("initialized: %w", err)
		}
	}
	return c, nil
}

func (c *mcpPairs) close() { c.hc.CloseIdleConnections() }

// post sends one JSON-RPC message and returns the response's headers and
// its JSON-RPC answer (the last one in an event stream).
func (c *mcpPairs) post(msg map[string]any, headers map[string]string) (http.Header, map[string]any, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, c.s.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, raw)
	}
	var answer map[string]any
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		err = json.Unmarshal(t, &answer)
	} else {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data:"); ok {
				var m map[string]any
				if json.Unmarshal([]byte(strings.TrimSpace(d)), &m) == nil && (m["result"] != nil || m["error"] != nil) {
					answer = m
				}
			}
		}
	}
	return resp.Header, answer, err
}

// tool calls a tool and returns its structured result.
func (c *mcpPairs) tool(name string, args map[string]any) (map[string]any, error) {
	c.id++
	params := map[string]any{"name": name, "arguments": args}
	headers := map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": c.session}
	if c.era == "modern" {
		params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/clientInfo": map[string]any{"name": "bench", "version": "1"}}
		headers = map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
	}
	_, answer, err := c.post(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": "tools/call", "params": params}, headers)
	if err != nil {
		return nil, err
	}
	res, _ := answer["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if res == nil || res["isError"] == true || sc == nil {
		return nil, fmt.Errorf("%s: %.300v", name, answer)
	}
	return sc, nil
}

// pair plans and executes pwd and returns the time both took.
func (c *mcpPairs) pair() (time.Duration, error) {
	start := time.Now()
	args := map[string]any{"command": "pwd"}
	if c.termd != "" {
		args["session_id"] = c.termd
	}
	p, err := c.tool("terminal_plan", args)
	if err != nil {
		return 0, err
	}
	if p["state"] != "planned" {
		return 0, fmt.Errorf("plan: state %v", p["state"])
	}
	if c.termd == "" {
		c.termd, _ = p["session_id"].(string)
	}
	planned := time.Now()
	x, err := c.tool("terminal_execute", map[string]any{"plan_id": p["plan_id"]})
	if err != nil {
		return 0, err
	}
	if x["state"] != "succeeded" {
		return 0, c.failedExecution(x)
	}
	end := time.Now()
	c.phases = [2]time.Duration{planned.Sub(start), end.Sub(planned)}
	return end.Sub(start), nil
}

// failedExecution says why an execution did not succeed, in full: its
// answer (exit code, signal, stdout, stderr, error = the receipt's detail)
// and, where termd signed one, the receipt (terminal_status), so a rare
// failure under load is diagnosable from the bench's log alone.
func (c *mcpPairs) failedExecution(x map[string]any) error {
	answer, _ := json.Marshal(x)
	err := fmt.Errorf("execute: state %v: %s", x["state"], answer)
	if id, _ := x["execution_id"].(string); id != "" && c.s.termd {
		st, serr := c.tool("terminal_status", map[string]any{"execution_id": id})
		if serr != nil {
			return fmt.Errorf("%w; terminal_status: %v", err, serr)
		}
		rec, _ := json.Marshal(st["receipt"])
		err = fmt.Errorf("%w; receipt: %s", err, rec)
	}
	return err
}
