package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestBenchSpeed prints issue 17's figures for the daemon, each against a
// baseline measured in the same run: plan+execute of /bin/true over gRPC
// against the durable floor (fork/exec + two fdatasyncs of a 4 KiB append in
// the state directory), and plan+execute of `cat` on 50 MiB of secret-shaped
// text, random bytes and a plain log against raw `cat` to a pipe and
// `cat | sha256sum`, with the daemon's CPU and peak RSS.
func TestBenchSpeed(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	addr := freeLoopback(t)
	// The 50 MiB files are written beside the state directory; a shared
	// machine's disk may run low, which is not what this measures.
	d := harness.Start(t, harness.Options{Config: "storage:\n  min_free_bytes: 67108864\n", Env: []string{"TERMD_DEBUG_PPROF=" + addr}})
	s, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sid := s.Session.Id
	// TERMD_BENCH_ONLY=cat runs only the 50 MiB part, =grpc only the pairs.
	only := os.Getenv("TERMD_BENCH_ONLY")
	if only != "cat" {
		benchPairs(t, d, sid, addr)
	}
	if only != "grpc" {
		benchCat(t, d, sid, addr)
	}
}

// benchArm is one daemon the pairs are timed on.
type benchArm struct {
	name, addr, sid string
	d               *harness.Daemon
	pairs           []time.Duration
	// cpu is the daemon's CPU over the rounds (refills between pairs
	// included; the transport's own timing excluded).
	cpu time.Duration
}

// benchPairs times gRPC plan+execute of /bin/true against the floor, with the
// spawn pools and without them (TERMD_SPAWN_POOL=0), in alternating rounds.
// TERMD_BENCH_BASELINE=DIR[:DIR...] (directories holding other builds'
// termd and termd-launch) times those builds too, pools on and off, pair by
// pair with this one: a change's before and after under the same load.
// The same rounds time the gRPC transport of a pair alone (transportFloor).
func benchPairs(t *testing.T, d *harness.Daemon, sid, addr string) {
	arms := []*benchArm{{name: "", addr: addr, sid: sid, d: d}}
	add := func(name, bin string, env ...string) {
		a := &benchArm{name: name, addr: freeLoopback(t)}
		a.d = harness.Start(t, harness.Options{Bin: bin, Env: append(env, "TERMD_DEBUG_PPROF="+a.addr)})
		s, err := a.d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		a.sid = s.Session.Id
		arms = append(arms, a)
	}
	// The same daemon without spawn pools: every execution makes its
	// network namespace and cgroup at spawn.
	add("TERMD_SPAWN_POOL=0", "", "TERMD_SPAWN_POOL=0")
	if dirs := os.Getenv("TERMD_BENCH_BASELINE"); dirs != "" {
		for i, dir := range filepath.SplitList(dirs) {
			name := "baseline"
			if i > 0 {
				name = fmt.Sprintf("baseline%d", i+1)
			}
			add(name, filepath.Join(dir, "termd"))
			add(name+" TERMD_SPAWN_POOL=0", filepath.Join(dir, "termd"), "TERMD_SPAWN_POOL=0")
		}
	}

	// Alternate pair by pair so that load from elsewhere hits all alike.
	const rounds, per = 200, 1
	var floor []time.Duration
	for range 10 { // warm up
		for _, a := range arms {
			runToEnd(t, a.d.Client, plan(t, a.d.Client, a.sid, "true"))
		}
	}
	grpcOnly := newTransportFloor(t, d)
	var transport []time.Duration
	for _, a := range arms {
		a.cpu = -harness.ThreadsCPU(a.d.Pid())
	}
	for i := range rounds {
		floor = append(floor, harness.Floor(t, d.StateDir, per)...)
		c0 := harness.ThreadsCPU(d.Pid())
		transport = append(transport, grpcOnly.time(t))
		arms[0].cpu -= harness.ThreadsCPU(d.Pid()) - c0
		// Each round starts at the next daemon, so that what one leaves
		// for after its pair (a spawn pool's refill) falls on each of the
		// others alike.
		for j := range arms {
			a := arms[(i+j)%len(arms)]
			for range per {
				start := time.Now()
				runToEnd(t, a.d.Client, plan(t, a.d.Client, a.sid, "true"))
				a.pairs = append(a.pairs, time.Since(start))
			}
		}
	}
	for _, a := range arms {
		a.cpu += harness.ThreadsCPU(a.d.Pid())
	}
	for _, a := range arms {
		what := "speed: gRPC plan+execute /bin/true"
		if a.name != "" {
			what += " (" + a.name + ")"
		}
		harness.BenchLine(t, what, a.pairs, "floor (fork/exec + 2 fdatasync 4 KiB)", floor, 1.3)
		if a.name == "" {
			harness.BenchLine(t, fmt.Sprintf("speed: gRPC transport alone (unary GetVersion + stream of a pair's %d events)", grpcOnly.n), transport, "floor", floor, 0)
			harness.BenchLine(t, "speed: gRPC plan+execute /bin/true, spawn pools", a.pairs, "without (TERMD_SPAWN_POOL=0)", arms[1].pairs, 0)
		}
		if strings.HasPrefix(a.name, "baseline") && !strings.HasSuffix(a.name, "POOL=0") {
			harness.BenchLine(t, "speed: gRPC plan+execute /bin/true, this build", arms[0].pairs, a.name, a.pairs, 0)
			per := func(a *benchArm) time.Duration { return a.cpu / time.Duration(len(a.pairs)) }
			harness.Bench(t, fmt.Sprintf("speed: termd CPU per gRPC pair (its threads' schedstat over the rounds, refills included), this build %v vs %s %v: ratio %.2fx",
				per(arms[0]).Round(10*time.Microsecond), a.name, per(a).Round(10*time.Microsecond), float64(arms[0].cpu)/float64(a.cpu)))
		}
		prefix := "speed:   "
		if a.name != "" {
			prefix += a.name + " "
		}
		for _, l := range strings.Split(strings.TrimSpace(stageReport(t, a.addr)), "\n") {
			harness.Bench(t, prefix+l)
		}
	}
}

// transportFloor is the gRPC part of a pair without the work behind it:
// the unary call (GetVersion, for CreatePlan) and a server stream that
// delivers the three events of a /bin/true execution (StreamEvents
// replaying them from the ring, for ExecuteAndWait), over the same
// connection to the same daemon.
type transportFloor struct {
	d     *harness.Daemon
	sid   string
	since uint64
	n     int
}

func newTransportFloor(t *testing.T, d *harness.Daemon) *transportFloor {
	t.Helper()
	s, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	f := &transportFloor{d: d, sid: s.Session.Id}
	runToEnd(t, d.Client, plan(t, d.Client, f.sid, "true"))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	st, err := d.Client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SessionId: f.sid, History: true})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch m.Event.Kind {
		case termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED:
			f.since = m.Event.Seq - 1
		case termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED:
			f.n = int(m.Event.Seq - f.since)
			return f
		}
	}
}

func (f *transportFloor) time(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := f.d.Client.Daemon.GetVersion(ctxT(t), &termdv1.GetVersionRequest{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	st, err := f.d.Client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SessionId: f.sid, SinceSeq: f.since})
	if err != nil {
		t.Fatal(err)
	}
	for range f.n {
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

// benchCat times plan+execute of `cat` on 50 MiB of each content against
// raw cat in the same run. With TERMD_BENCH_PROFILES=DIR it also keeps, per
// content, a CPU profile of the daemon and one of this process (the client
// reading the stream) over repeated runs: DIR/cat-<kind>-daemon.pb.gz and
// DIR/cat-<kind>-client.pb.gz.
func benchCat(t *testing.T, d *harness.Daemon, sid, addr string) {
	const size = 50 << 20
	kinds := []struct{ name, file, short string }{
		{"secret-shaped text", "secretish.txt", "secret"},
		{"random bytes", "random.bin", "random"},
		{"plain log", "plain.log", "log"},
	}
	writeBig(t, filepath.Join(d.Workspace, kinds[0].file), size, secretShaped)
	writeBig(t, filepath.Join(d.Workspace, kinds[1].file), size, randomBytes)
	writeBig(t, filepath.Join(d.Workspace, kinds[2].file), size, plainLog)
	const runs = 3
	for _, k := range kinds {
		path := filepath.Join(d.Workspace, k.file)
		var raw, hashed, via []time.Duration
		var cpu, clientCPU time.Duration
		for range runs {
			raw = append(raw, rawCat(t, path, false))
			hashed = append(hashed, rawCat(t, path, true))
			c0, cc0 := harness.CPUTime(d.Pid()), selfCPU()
			start := time.Now()
			n := catThrough(t, d, sid, path)
			via = append(via, time.Since(start))
			cpu += harness.CPUTime(d.Pid()) - c0
			clientCPU += selfCPU() - cc0
			if n != size {
				t.Fatalf("%s: the command wrote %d bytes of %d", k.name, n, size)
			}
		}
		harness.BenchLine(t, "speed: plan+execute cat 50 MiB "+k.name, via, "cat | sha256sum", hashed, 1.5)
		harness.Bench(t, fmt.Sprintf("speed:   raw cat to a pipe median %v (termd %.1fx); daemon CPU %.2f s per run; client CPU %.2f s per run; daemon peak RSS %d MiB",
			harness.Pct(raw, 50).Round(time.Millisecond), float64(harness.Pct(via, 50))/float64(harness.Pct(raw, 50)),
			cpu.Seconds()/runs, clientCPU.Seconds()/runs, harness.StatusKB(d.Pid(), "VmHWM")>>10))
		if dir := os.Getenv("TERMD_BENCH_PROFILES"); dir != "" {
			profileCat(t, d, sid, path, addr, filepath.Join(dir, "cat-"+k.short))
		}
	}
}

// profileCat runs `cat path` through termd over and over while the daemon's
// CPU profile (6 s) is taken, with this process's own CPU profile beside it,
// and writes them to prefix-daemon.pb.gz and prefix-client.pb.gz.
func profileCat(t *testing.T, d *harness.Daemon, sid, path, addr, prefix string) {
	t.Helper()
	f, err := os.Create(prefix + "-client.pb.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make(chan []byte, 1)
	go func() {
		var body []byte
		if resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=6"); err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		got <- body
	}()
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	var body []byte
	for body == nil {
		catThrough(t, d, sid, path)
		select {
		case body = <-got:
		default:
		}
	}
	pprof.StopCPUProfile()
	if err := os.WriteFile(prefix+"-daemon.pb.gz", body, 0o644); err != nil {
		t.Fatal(err)
	}
}

// selfCPU is the CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// catThrough plans and runs `cat path`, drains every output event (a reader
// that falls behind the ring may get a lag notice instead of some) and
// returns how many bytes the execution wrote.
func catThrough(t *testing.T, d *harness.Daemon, sid, path string) int64 {
	t.Helper()
	p := plan(t, d.Client, sid, "cat", path)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := d.Client.Executions.ExecuteAndWait(ctx, &termdv1.ExecuteAndWaitRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for {
		m, err := st.Recv()
		if err != nil {
			t.Logf("%s: the stream ended: %v", path, err)
			return n
		}
		if m.Event.Kind == termdv1.EventKind_EVENT_KIND_FINISHED {
			n = m.Event.GetExecution().GetStdoutBytes()
		}
		if m.Event.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
			return n
		}
	}
}

// rawCat runs /bin/cat path into a pipe this process drains, or (hash) into
// sha256sum.
func rawCat(t *testing.T, path string, hash bool) time.Duration {
	t.Helper()
	start := time.Now()
	cat := exec.Command("/bin/cat", path)
	if !hash {
		out, _ := cat.StdoutPipe()
		if err := cat.Start(); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, out)
		if err := cat.Wait(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	sum := exec.Command("sha256sum")
	pipe, _ := cat.StdoutPipe()
	sum.Stdin = pipe
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	if err := sum.Run(); err != nil {
		t.Fatal(err)
	}
	if err := cat.Wait(); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// The three contents: 127-character lines of [0-9a-zA-Z-_.:/+=] (what
// build logs, lockfiles and hashes look like to a redactor), random bytes,
// and a plain log of words.
func secretShaped(i int) []byte {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.:/+="
	line := make([]byte, 128)
	for j := range 127 {
		line[j] = alphabet[(i*7+j*13)%len(alphabet)]
	}
	line[127] = '\n'
	return line
}

func randomBytes(int) []byte {
	b := make([]byte, 64<<10)
	_, _ = rand.Read(b)
	return b
}

func plainLog(i int) []byte {
	return fmt.Appendf(nil, "2026-12-01 22:%02d:%02d.%03d INFO worker %d finished job %d for user alice in %d ms (queue depth %d, retries 0)\n",
		i/60%60, i%60, i%1000, i%8, i, i%977, i%31)
}

func writeBig(t *testing.T, path string, size int, chunk func(int) []byte) {
	t.Helper()
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		b.Write(chunk(i))
	}
	if err := os.WriteFile(path, b.Bytes()[:size], 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBenchConcurrent: 64 sessions at once, each planning and executing
// /bin/true in a loop: plans/s and executions/s with p50/p99 latency,
// against the same work done by one session alone in the same run (the
// global mutex must not serialise durable writes).
func TestBenchConcurrent(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	addr := freeLoopback(t)
	d := harness.Start(t, harness.Options{Config: "sessions:\n  per_principal: 100\n  global: 200\n  max_running: 100\n  max_streams: 200\n", Env: []string{"TERMD_DEBUG_PPROF=" + addr}})
	const workers, per = 64, 8
	round := func(n int) (plans, execs []time.Duration, wall time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := d.Client.Sessions.CreateSession(context.Background(), &termdv1.CreateSessionRequest{})
				if err != nil {
					t.Error(err)
					return
				}
				for range per {
					t0 := time.Now()
					p, err := d.Client.Plans.CreatePlan(context.Background(), &termdv1.CreatePlanRequest{SessionId: s.Session.Id, Request: &termdv1.CommandRequest{Argv: []string{"true"}}})
					if err != nil {
						t.Error(err)
						return
					}
					t1 := time.Now()
					st, err := d.Client.Executions.ExecuteAndWait(context.Background(), &termdv1.ExecuteAndWaitRequest{PlanId: p.Plan.Id})
					if err != nil {
						t.Error(err)
						return
					}
					for {
						m, err := st.Recv()
						if err != nil || m.Event.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
							break
						}
					}
					t2 := time.Now()
					mu.Lock()
					plans, execs = append(plans, t1.Sub(t0)), append(execs, t2.Sub(t1))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return plans, execs, time.Since(start)
	}
	_, oneExec, oneWall := round(1)
	profiled := make(chan []byte, 1)
	if os.Getenv("TERMD_BENCH_PROFILES") != "" {
		go func() { // the daemon's CPU profile of the 64-session round
			resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=8")
			var body []byte
			if err == nil {
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			profiled <- body
		}()
	}
	cpu0 := harness.CPUTime(d.Pid())
	plans, execs, wall := round(workers)
	cpu := harness.CPUTime(d.Pid()) - cpu0
	if t.Failed() {
		return
	}
	harness.Bench(t, fmt.Sprintf("concurrent: %d sessions: %.0f plans/s and %.0f executions/s (one session alone: %.0f/s); plan p50 %v p99 %v; execute p50 %v p99 %v (one session alone: p50 %v); termd CPU per plan+execution %v",
		workers, float64(len(plans))/wall.Seconds(), float64(len(execs))/wall.Seconds(), float64(len(oneExec))/oneWall.Seconds(),
		harness.Pct(plans, 50).Round(10*time.Microsecond), harness.Pct(plans, 99).Round(10*time.Microsecond),
		harness.Pct(execs, 50).Round(10*time.Microsecond), harness.Pct(execs, 99).Round(10*time.Microsecond), harness.Pct(oneExec, 50).Round(10*time.Microsecond),
		(cpu/time.Duration(max(1, len(execs)))).Round(10*time.Microsecond)))
	for _, l := range strings.Split(strings.TrimSpace(stageReport(t, addr)), "\n") {
		harness.Bench(t, "concurrent:   "+l)
	}
	// TERMD_BENCH_PROFILES=DIR keeps the daemon's CPU profile of the
	// 64-session round and its mutex and block profiles of the run
	// (go tool pprof DIR/cpu.pb.gz).
	if dir := os.Getenv("TERMD_BENCH_PROFILES"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "cpu.pb.gz"), <-profiled, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"mutex", "block"} {
			resp, err := http.Get("http://" + addr + "/debug/pprof/" + name)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err := os.WriteFile(filepath.Join(dir, name+".pb.gz"), body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
