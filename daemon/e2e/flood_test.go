package e2e

import (
	"bufio"
	"bytes"
	"context"
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
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// floodHelperEnv makes the test binary open many connections to a socket as
// whatever uid it runs as ("SOCKET N MODE": MODE preface sends the HTTP/2
// client preface and an empty SETTINGS frame and then idles, silent sends
// nothing). It prints "dialed N" and then, for each line read on stdin, how
// many of its connections the daemon has closed; it exits when stdin closes.
// MODE loop connects and closes at once, again and again, from N goroutines,
// and answers each line with how many connects succeeded so far.
const floodHelperEnv = "TERMD_E2E_FLOOD_HELPER"

func floodHelper(spec string) int {
	f := strings.Fields(spec)
	n, _ := strconv.Atoi(f[1])
	var closed atomic.Int64
	if f[2] == "loop" {
		for i := 0; i < n; i++ {
			go func() {
				for {
					if c, err := net.Dial("unix", f[0]); err == nil {
						closed.Add(1)
						c.Close()
					}
				}
			}()
		}
		fmt.Println("dialed 0")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Printf("%d\n", closed.Load())
		}
		return 0
	}
	var conns []net.Conn
	for i := 0; i < n; i++ {
		c, err := net.Dial("unix", f[0])
		if err != nil {
			closed.Add(1)
			continue
		}
		if f[2] == "preface" {
			var b bytes.Buffer
			b.WriteString(http2.ClientPreface)
			_ = http2.NewFramer(&b, nil).WriteSettings()
			_, _ = c.Write(b.Bytes())
		}
		conns = append(conns, c)
		go func() { // the daemon's frames are read and dropped; EOF means closed
			_, _ = io.Copy(io.Discard, c)
			closed.Add(1)
		}()
	}
	fmt.Printf("dialed %d\n", n)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Printf("%d\n", closed.Load())
	}
	for _, c := range conns {
		c.Close()
	}
	return 0
}

// flooder is a running flood helper.
type flooder struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// flood opens n connections to d as cred from a child process.
func flood(t *testing.T, d *harness.Daemon, cred *syscall.Credential, n int, mode string) *flooder {
	t.Helper()
	cmd := exec.Command(helperBinary(t))
	cmd.Env = []string{fmt.Sprintf("%s=%s %d %s", floodHelperEnv, d.Socket, n, mode)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &flooder{cmd: cmd, in: in, out: bufio.NewScanner(outp)}
	var once sync.Once
	stop := func() { once.Do(func() { in.Close(); _ = cmd.Wait() }) }
	t.Cleanup(stop)
	if !f.out.Scan() || !strings.HasPrefix(f.out.Text(), "dialed ") {
		t.Fatalf("flood helper did not start: %q", f.out.Text())
	}
	return f
}

// closed asks how many of the helper's connections the daemon has closed.
func (f *flooder) closed(t *testing.T) int {
	t.Helper()
	fmt.Fprintln(f.in, "?")
	if !f.out.Scan() {
		t.Fatal("flood helper went away")
	}
	n, _ := strconv.Atoi(f.out.Text())
	return n
}

// stop ends the helper (its connections close with it).
func (f *flooder) stop() { f.in.Close(); _ = f.cmd.Wait() }

func openFDs(t *testing.T, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// metric reads one unlabelled gauge from termd's metrics listener.
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	t.Fatalf("metric %s not served", name)
	return 0
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// statusTime runs root's `termctl status` and returns how long it took.
func statusTime(t *testing.T, d *harness.Daemon) time.Duration {
	t.Helper()
	start := time.Now()
	out, errOut, code := d.Run("termctl", "status")
	if code != 0 {
		t.Fatalf("root's termctl status failed during the flood (exit %d): %s%s", code, out, errOut)
	}
	return time.Since(start)
}

// A uid with no role is turned away at accept, with the reason, before termd
// reads a byte of HTTP/2 from it; a flood of such connections holds nothing.
func TestNoRoleRefusedAtAccept(t *testing.T) {
	d := harness.Start(t, harness.Options{Config: "socket_group: \"65534\"\n"})
	_, errOut, code := d.RunAs(harness.Nobody, "termctl", []string{}, "status")
	if code == 0 || !strings.Contains(errOut, "uid 65534 has no role") || !strings.Contains(errOut, "roles.agents") {
		t.Fatalf("termctl status as a uid without a role: exit %d, %q; want the refusal naming the uid and the roles keys", code, errOut)
	}
	idle := openFDs(t, d.Pid())
	f := flood(t, d, harness.Nobody, 300, "silent")
	deadline := time.Now().Add(10 * time.Second)
	for f.closed(t) < 300 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := f.closed(t); n < 300 {
		t.Fatalf("only %d of 300 connections from a uid without a role were closed (without sending anything); fds %d → %d", n, idle, openFDs(t, d.Pid()))
	}
	time.Sleep(1500 * time.Millisecond) // refusals linger up to 1s so a client can read why
	if now := openFDs(t, d.Pid()); now > idle+8 {
		t.Fatalf("termd holds %d descriptors with every connection of the flood refused (idle %d)", now, idle)
	}
	statusTime(t, d)
}

// One agent uid opens far more connections than its share; each beyond
// connections.per_uid is closed at once, the ones it keeps are closed when
// they idle, and root is served promptly throughout with termd's
// descriptors and memory bounded.
func TestConnectionFloodLeavesOthersServed(t *testing.T) {
	addr := freeAddr(t)
	d := harness.Start(t, harness.Options{Config: agentConfig + fmt.Sprintf(
		"metrics_listen: %q\nconnections:\n  per_uid: 16\n  handshake_timeout: 1s\n  idle_timeout: 3s\n", addr)})
	idleFDs, idleRSS := openFDs(t, d.Pid()), procStatus(t, d.Pid(), "VmRSS")
	baseline := statusTime(t, d)

	f := flood(t, d, harness.Nobody, 400, "preface")
	time.Sleep(300 * time.Millisecond)
	if n := f.closed(t); n < 400-16 {
		t.Fatalf("%d of 400 connections from one uid were closed; all past connections.per_uid (16) should be", n)
	}
	time.Sleep(1200 * time.Millisecond) // past the flood's lingering refusals
	_, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "status")
	if code == 0 || !strings.Contains(errOut, "connections.per_uid") {
		t.Fatalf("the flooding uid's own termctl status: exit %d, %q; want a refusal naming connections.per_uid", code, errOut)
	}
	for i := 0; i < 5; i++ {
		if took := statusTime(t, d); took > 10*baseline+2*time.Second {
			t.Fatalf("root's termctl status took %s during the flood (%s idle)", took, baseline)
		}
	}
	fds, rss := openFDs(t, d.Pid()), procStatus(t, d.Pid(), "VmRSS")
	if fds > idleFDs+16+16 {
		t.Fatalf("termd holds %d descriptors during the flood (idle %d, per_uid 16)", fds, idleFDs)
	}
	if rss > 2*idleRSS+64<<10 {
		t.Fatalf("termd's RSS grew from %d to %d kB during the flood", idleRSS, rss)
	}
	if open := metric(t, addr, "termd_connections"); open > 16+2 {
		t.Fatalf("termd_connections = %v during the flood", open)
	}
	if refused := metric(t, addr, "termd_connections_refused"); refused < 400-16 {
		t.Fatalf("termd_connections_refused = %v, want at least %d", refused, 400-16)
	}

	// The 16 it kept never make a call: closed once idle_timeout passes.
	deadline := time.Now().Add(15 * time.Second)
	for f.closed(t) < 400 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := f.closed(t); n < 400 {
		t.Fatalf("%d of the connections that idle were still open 15s after a 3s idle_timeout", 400-n)
	}
	// A connection that never says anything is closed after handshake_timeout.
	s := flood(t, d, harness.Nobody, 8, "silent")
	time.Sleep(2500 * time.Millisecond)
	if n := s.closed(t); n < 8 {
		t.Fatalf("%d of 8 connections that never sent the HTTP/2 preface were open after a 1s handshake_timeout", 8-n)
	}
	f.stop()
	s.stop()
	if _, _, code := d.RunAs(harness.Nobody, "termctl", nil, "status"); code != 0 {
		t.Fatal("the agent uid could not connect again after its flood ended")
	}
}

// TestBenchFlood floods termd with 64 clients, each a process of its own uid
// opening 32 connections that send the HTTP/2 preface and then idle (2048 in
// all, past connections.global), and prints the daemon's descriptors,
// goroutines and RSS during and after the flood, and root's `termctl status`
// time during it, as ratios to the idle daemon. Run with `make bench`.
func TestBenchFlood(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	addr := freeAddr(t)
	d := harness.Start(t, harness.Options{Config: fmt.Sprintf("socket_group: \"65534\"\nroles:\n  default: agent\nmetrics_listen: %q\n", addr)})
	type sample struct {
		fds, goroutines, rss float64
		status               time.Duration
	}
	measure := func() sample {
		var st time.Duration
		for i := 0; i < 5; i++ {
			st += statusTime(t, d)
		}
		return sample{float64(openFDs(t, d.Pid())), metric(t, addr, "go_goroutines"), float64(procStatus(t, d.Pid(), "VmRSS")), st / 5}
	}
	idle := measure()
	var fl []*flooder
	for i := 0; i < 64; i++ {
		fl = append(fl, flood(t, d, &syscall.Credential{Uid: uint32(61000 + i), Gid: 65534}, 32, "preface"))
	}
	time.Sleep(1500 * time.Millisecond)
	during := measure()
	open, refused := metric(t, addr, "termd_connections"), metric(t, addr, "termd_connections_refused")
	for _, f := range fl {
		f.stop()
	}
	time.Sleep(2 * time.Second)
	after := measure()
	report := func(name string, s sample) {
		line := fmt.Sprintf("%-6s fds %.2fx (%.0f)  goroutines %.2fx (%.0f)  rss %.2fx (%.0f MiB)  root status %.2fx", name,
			s.fds/idle.fds, s.fds, s.goroutines/idle.goroutines, s.goroutines, s.rss/idle.rss, s.rss/1024, float64(s.status)/float64(idle.status))
		fmt.Println("BENCH flood: " + line)
		t.Log(line)
	}
	fmt.Printf("BENCH flood: 64 clients x 32 idle connections: %.0f held, %.0f refused at accept (connections.global 1024); idle daemon %.0f fds, %.0f goroutines, %.0f MiB\n",
		open, refused, idle.fds, idle.goroutines, idle.rss/1024)
	report("during", during)
	report("after", after)
}

// An agent that opens event streams it never reads, reads output in a tight
// loop from many goroutines and asks for huge pages is held to its share:
// the excess is refused naming the key, root stays served, and the daemon's
// goroutines return to their baseline when the agent goes away.
func TestAbusiveReaderIsBoundedPerPrincipal(t *testing.T) {
	requireRoot(t)
	addr := freeAddr(t)
	d := harness.Start(t, harness.Options{Config: agentConfig + fmt.Sprintf("metrics_listen: %q\nsessions:\n  max_streams: 16\nconnections:\n  calls_per_principal: 4\n", addr)})
	agent := agentClient(t, d, harness.Nobody)
	var big strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&big, "%d\n", i)
	}
	if err := os.WriteFile(filepath.Join(d.Workspace, "big.txt"), []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := plan(t, agent, "", "cat", "big.txt")
	x, _, out, _ := runToEnd(t, agent, p)
	if !strings.Contains(out, "20000") {
		t.Fatalf("seq output: %q", out[max(0, len(out)-50):])
	}
	time.Sleep(500 * time.Millisecond)
	baseG := metric(t, addr, "go_goroutines")
	baseHeap := metric(t, addr, "go_memstats_heap_inuse_bytes")
	baseline := statusTime(t, d)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Event streams that are never read.
	var streamErr error
	for i := 0; i < 20; i++ {
		st, err := agent.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{})
		if err == nil {
			_, err = st.Header() // the call is established; nothing is ever read
			if i >= 16 {
				_, err = st.Recv()
			}
		}
		if err != nil {
			streamErr = err
		}
	}
	if streamErr == nil || !strings.Contains(streamErr.Error(), "sessions.max_streams") {
		t.Fatalf("the 17th event stream of one agent: %v; want a refusal naming sessions.max_streams", streamErr)
	}
	// ReadOutput in a tight loop from 64 goroutines.
	var ok, refused, other atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				_, err := agent.Executions.ReadOutput(ctx, &termdv1.ReadOutputRequest{ExecutionId: x.Id, Limit: 1 << 30})
				switch {
				case err == nil:
					ok.Add(1)
				case strings.Contains(err.Error(), "connections.calls_per_principal"):
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	took := statusTime(t, d)
	duringG := metric(t, addr, "go_goroutines")
	duringHeap := metric(t, addr, "go_memstats_heap_inuse_bytes")
	wg.Wait()
	if ok.Load() == 0 || refused.Load() == 0 || other.Load() != 0 {
		t.Fatalf("ReadOutput loop: %d answered, %d refused naming connections.calls_per_principal, %d other errors", ok.Load(), refused.Load(), other.Load())
	}
	if took > 10*baseline+2*time.Second {
		t.Fatalf("root's termctl status took %s while an agent read in a loop (%s idle)", took, baseline)
	}
	_, err := agent.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{Limit: 1 << 30})
	if err == nil || !strings.Contains(err.Error(), "page with offset") {
		t.Fatalf("ListReceipts with a limit of 2^30: %v; want a refusal that says how to page", err)
	}
	if duringHeap > baseHeap+256<<20 {
		t.Fatalf("heap in use grew from %.0f to %.0f bytes", baseHeap, duringHeap)
	}

	cancel()
	agent.Close()
	deadline := time.Now().Add(10 * time.Second)
	var afterG float64
	for time.Now().Before(deadline) {
		if afterG = metric(t, addr, "go_goroutines"); afterG <= baseG+2 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("goroutines: idle %.0f, during %.0f, after %.0f; heap in use: idle %.1f MiB, during %.1f MiB; ReadOutput %d answered, %d refused",
		baseG, duringG, afterG, baseHeap/(1<<20), duringHeap/(1<<20), ok.Load(), refused.Load())
	if afterG > baseG+2 {
		t.Fatalf("goroutines did not return to the baseline %.0f after the agent went away: %.0f", baseG, afterG)
	}
}

// Past its daily budget of stored receipts a principal's executions are
// refused before anything runs, naming the key; its plan stays and runs once
// the budget allows. A state directory below the free-space floor refuses
// new executions the same way.
func TestStorageBudgetsRefuseNewWork(t *testing.T) {
	requireRoot(t)
	d, agent := budgetDaemon(t)
	s, err := agent.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A plan made before the budget is spent is refused at execution and
	// stays planned; past the budget new plans are refused too (each may
	// end in a receipt).
	spare := plan(t, agent, s.Session.Id, "cat", "big.txt")
	ran, refusal := runUntilRefused(t, agent, s.Session.Id, func() {})
	if refusal == nil || !strings.Contains(refusal.Error(), "storage.per_principal_day") || ran < 1 {
		t.Fatalf("after %d runs of 300 KiB each against a 1 MiB budget: %v; want a refusal naming storage.per_principal_day", ran, refusal)
	}
	if _, err := agent.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: spare.Id}); err == nil || !strings.Contains(err.Error(), "storage.per_principal_day") {
		t.Fatalf("executing a plan made before the budget was spent: %v; want a refusal naming storage.per_principal_day", err)
	}
	if got, err := agent.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: spare.Id}); err != nil || got.Plan.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("the refused plan should stay planned: %v %v", got.GetPlan().GetState(), err)
	}
	// Root is another principal with its own budget.
	p := plan(t, d.Client, "", "cat", "big.txt")
	runToEnd(t, d.Client, p)
	// Every execution that ran has its signed receipt; the chain verifies.
	if out, errOut, code := d.Run("termctl", "audit", "verify"); code != 0 {
		t.Fatalf("audit verify: %s%s", out, errOut)
	}

	d.Stop()
	_ = os.WriteFile(d.ConfigPath, []byte(agentConfig+"storage:\n  min_free_bytes: 1125899906842624\n"), 0o600)
	d.Restart()
	p = plan(t, d.Client, "", "true")
	_, err = d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err == nil || !strings.Contains(err.Error(), "storage.min_free_bytes") {
		t.Fatalf("execution with the state directory below the free-space floor: %v; want a refusal naming storage.min_free_bytes", err)
	}
}

// waitFinished waits until a plan reaches a final state.
func waitFinished(t *testing.T, c *client.Client, planID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got, err := c.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: planID})
		if err != nil {
			t.Fatal(err)
		}
		switch got.Plan.State {
		case termdv1.PlanState_PLAN_STATE_PLANNED, termdv1.PlanState_PLAN_STATE_APPROVED, termdv1.PlanState_PLAN_STATE_RUNNING, termdv1.PlanState_PLAN_STATE_PAUSED:
			time.Sleep(50 * time.Millisecond)
			continue
		}
		// The receipt is signed before the final state is visible.
		return
	}
	t.Fatalf("plan %s did not finish", planID)
}
