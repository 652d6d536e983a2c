package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestBenchBroker measures termd against baselines taken in the same run.
// Run with `make bench` (TERMD_BENCH=1).
func TestBenchBroker(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	d := harness.Start(t, harness.Options{Config: "sessions:\n  per_principal: 100\n  global: 200\n",
		// The 1 GiB run measures throughput, not the output budget (64 MiB by default).
		Policy: budgetPolicy(t, "2147483648"),
		Env:    []string{"TERMD_DEBUG_PPROF=" + os.Getenv("TERMD_DEBUG_PPROF"), "GOGC=" + os.Getenv("GOGC")}})
	report := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		fmt.Println("BENCH broker: " + line)
		t.Log(line)
	}

	// 1. plan + execute of /bin/true (signed, durable receipt) vs fork/exec of /bin/true.
	const n = 200
	direct := make([]time.Duration, n)
	for i := range direct {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Fatal(err)
		}
		direct[i] = time.Since(start)
	}
	via := make([]time.Duration, n)
	s, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	for i := range via {
		start := time.Now()
		p := plan(t, d.Client, s.Session.Id, "true")
		runToEnd(t, d.Client, p)
		via[i] = time.Since(start)
	}
	md, mv := median(direct), median(via)
	report("plan+execute /bin/true: median %v, p90 %v; direct fork/exec median %v; ratio %.1fx", mv, p90(via), md, float64(mv)/float64(md))

	// 2. 1 GiB to stdout through the daemon (client drains every output event) vs a plain pipe.
	const size = 1 << 30
	start := time.Now()
	cmd := exec.Command("head", "-c", strconv.Itoa(size), "/dev/zero")
	out, _ := cmd.StdoutPipe()
	cmd.Start()
	nread, _ := io.Copy(io.Discard, out)
	cmd.Wait()
	pipeDur := time.Since(start)
	rssBefore := procStatus(t, d.Pid(), "VmRSS")
	start = time.Now()
	p := plan(t, d.Client, s.Session.Id, "head", "-c", strconv.Itoa(size), "/dev/zero")
	long, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	st, err := d.Client.Executions.ExecuteAndWait(long, &termdv1.ExecuteAndWaitRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	var fin *termdv1.Execution
	for {
		m, err := st.Recv()
		if err != nil {
			break
		}
		got += int64(len(m.Event.GetOutput().GetData()))
		if m.Event.Kind == termdv1.EventKind_EVENT_KIND_FINISHED {
			fin = m.Event.GetExecution()
		}
	}
	viaDur := time.Since(start)
	peak := procStatus(t, d.Pid(), "VmHWM")
	if fin == nil || fin.StdoutBytes != size || nread != size {
		t.Fatalf("1 GiB run: finished %v, counted %d", fin, nread)
	}
	mibs := func(d time.Duration) float64 { return float64(size) / (1 << 20) / d.Seconds() }
	report("1 GiB stdout: through termd %.0f MiB/s (client received %d MiB of live events), plain pipe %.0f MiB/s; throughput ratio %.2f", mibs(viaDur), got>>20, mibs(pipeDur), mibs(viaDur)/mibs(pipeDur))
	report("daemon RSS before %d MiB, peak during the 1 GiB run %d MiB: growth %d MiB", rssBefore>>10, peak>>10, (peak-rssBefore)>>10)

	// 3. plans per second with 64 concurrent sessions.
	const workers, per = 64, 20
	var count atomic.Int64
	var wg sync.WaitGroup
	start = time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss, err := d.Client.Sessions.CreateSession(context.Background(), &termdv1.CreateSessionRequest{})
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < per; i++ {
				if _, err := d.Client.Plans.CreatePlan(context.Background(), &termdv1.CreatePlanRequest{SessionId: ss.Session.Id, Request: &termdv1.CommandRequest{Argv: []string{"ls", "-la"}}}); err != nil {
					t.Error(err)
					return
				}
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	report("plans/s with %d concurrent sessions: %.0f (%d plans in %v)", workers, float64(count.Load())/el.Seconds(), count.Load(), el.Round(time.Millisecond))
}

func median(ds []time.Duration) time.Duration { return pct(ds, 50) }
func p90(ds []time.Duration) time.Duration    { return pct(ds, 90) }

func pct(ds []time.Duration, p int) time.Duration {
	c := append([]time.Duration(nil), ds...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[(len(c)-1)*p/100]
}

// procStatus reads a kB field of /proc/PID/status.
func procStatus(t *testing.T, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// TestBenchSandbox measures what the sandbox costs per execution: plan +
// execute of /bin/true on a daemon with the sandbox required against the
// same on a daemon with it off, in alternating rounds of the same run.
func TestBenchSandbox(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	requireSandbox(t)
	on := harness.Start(t, harness.Options{Config: "sandbox: required\n"})
	off := harness.Start(t, harness.Options{Config: "sandbox: off\n"})
	sOn, _ := on.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	sOff, _ := off.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	const rounds, per = 5, 40
	var withSB, without []time.Duration
	pair := func(d *harness.Daemon, session string, argv ...string) time.Duration {
		start := time.Now()
		runToEnd(t, d.Client, plan(t, d.Client, session, argv...))
		return time.Since(start)
	}
	for r := 0; r < rounds; r++ {
		for i := 0; i < per; i++ {
			without = append(without, pair(off, sOff.Session.Id, "true"))
			withSB = append(withSB, pair(on, sOn.Session.Id, "true"))
		}
	}
	mOn, mOff := median(withSB), median(without)
	line := fmt.Sprintf("plan+execute /bin/true: sandbox required median %v (p90 %v), sandbox off median %v (p90 %v); ratio %.3fx (sandbox cost %+.1f%%)",
		mOn, p90(withSB), mOff, p90(without), float64(mOn)/float64(mOff), 100*(float64(mOn)/float64(mOff)-1))
	fmt.Println("BENCH sandbox: " + line)
	t.Log(line)
}
