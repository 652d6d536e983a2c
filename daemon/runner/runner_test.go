//go:build linux

package runner

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
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

	"github.com/termd/termd/daemon/runner/pool"
	"github.com/termd/termd/daemon/runner/proctree"
)

func TestMain(m *testing.M) {
	// The daemon does this at start; orphans of executions come to us.
	if err := EnableSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
	}
	os.Exit(m.Run())
}

var parentSeq atomic.Int64

type mode struct {
	name string
	opts Options
}

func modes(t *testing.T) []mode {
	ms := []mode{{"fallback", Options{NoCgroups: true}}}
	if c := Probe(); c.CgroupV2 != "" && os.Geteuid() == 0 {
		ms = append([]mode{{"cgroup", Options{}}}, ms...)
	} else {
		t.Log("no usable cgroup v2: testing the fallback only")
	}
	return ms
}

func newRunner(t *testing.T, o Options) *Runner {
	t.Helper()
	if !o.NoCgroups {
		if c := Probe(); c.CgroupV2 != "" {
			o.CgroupParent = filepath.Join(c.CgroupV2, fmt.Sprintf("termd-test-%d-%d", os.Getpid(), parentSeq.Add(1)))
		}
	}
	r, err := NewWithOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close runner: %v", err)
		}
	})
	return r
}

func sh(script string) Spec {
	return Spec{
		Path:    "/bin/sh",
		Argv:    []string{"sh", "-c", script},
		Env:     []string{"PATH=/usr/bin:/bin"},
		Timeout: 30 * time.Second,
		Grace:   500 * time.Millisecond,
	}
}

func start(t *testing.T, r *Runner, s Spec) *Process {
	t.Helper()
	p, err := r.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// firstLine waits for the first full line of stdout.
func firstLine(t *testing.T, p *Process) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		data, _, done := p.ReadOutput(Stdout, 0, -1)
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return string(data[:i])
		}
		if done {
			t.Fatalf("stdout ended without a line: %q", data)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no line on stdout")
	return ""
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// gone: no such process at all (not even a zombie: orphans must be reaped).
func assertGone(t *testing.T, pid int, what string) {
	t.Helper()
	if pi, ok := proctree.Read(pid); ok {
		t.Errorf("%s (pid %d) survived the execution: state %c ppid %d", what, pid, pi.State, pi.PPid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func assertAlive(t *testing.T, pid int, what string) {
	t.Helper()
	if pi, ok := proctree.Read(pid); !ok || pi.State == 'Z' {
		t.Fatalf("%s (pid %d) is not running", what, pid)
	}
}

func TestEnvironmentStdinAndGroup(t *testing.T) {
	r := newRunner(t, Options{NoCgroups: true})
	os.Setenv("TERMD_SHOULD_NOT_LEAK", "secret")
	defer os.Unsetenv("TERMD_SHOULD_NOT_LEAK")

	res := start(t, r, Spec{Path: "/usr/bin/env", Timeout: 10 * time.Second}).Wait()
	if res.Status != StatusSucceeded || len(res.Stdout.Kept) != 0 {
		t.Fatalf("empty Env must mean an empty environment: %s %q", res.Status, res.Stdout.Kept)
	}
	res = start(t, r, Spec{Path: "/usr/bin/env", Env: []string{"A=1", "B=two"}, Timeout: 10 * time.Second}).Wait()
	if got := string(res.Stdout.Kept); got != "A=1\nB=two\n" {
		t.Fatalf("env = %q", got)
	}

	// stdin is /dev/null: cat ends at once; own process group: pgid == pid.
	s := sh(`cat; read _ _ _ _ pgid _ < /proc/$$/stat; echo "$pgid $$"`)
	s.Dir = "/tmp"
	p := start(t, r, s)
	res = p.Wait()
	f := strings.Fields(string(res.Stdout.Kept))
	if res.Status != StatusSucceeded || len(f) != 2 || f[0] != f[1] || f[1] != strconv.Itoa(p.Pid()) {
		t.Fatalf("want own process group: %s %q (pid %d)", res.Status, res.Stdout.Kept, p.Pid())
	}
	if _, err := r.Start(Spec{Path: "sh", Timeout: time.Second}); err == nil {
		t.Fatal("a relative path must be refused")
	}
	if _, err := r.Start(Spec{Path: "/bin/true"}); err == nil {
		t.Fatal("a missing timeout must be refused")
	}
}

func TestFinalStates(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			if res := start(t, r, Spec{Path: "/bin/true", Timeout: 10 * time.Second}).Wait(); res.Status != StatusSucceeded || res.ExitCode != 0 {
				t.Errorf("true: %+v", res)
			}
			res := start(t, r, sh("echo out; echo err >&2; exit 3")).Wait()
			if res.Status != StatusFailed || res.ExitCode != 3 || res.Err != nil {
				t.Errorf("exit 3: %s %d %v", res.Status, res.ExitCode, res.Err)
			}
			if string(res.Stdout.Kept) != "out\n" || string(res.Stderr.Kept) != "err\n" {
				t.Errorf("streams: %q %q", res.Stdout.Kept, res.Stderr.Kept)
			}
			if res.CgroupUsed != (m.name == "cgroup") {
				t.Errorf("CgroupUsed = %v", res.CgroupUsed)
			}

			// Spawn failure: failed with the cause, never killed.
			p, err := r.Start(Spec{Path: "/nonexistent/bin", Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			res = p.Wait()
			if res.Status != StatusFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "no such file") {
				t.Errorf("spawn failure: %s %v", res.Status, res.Err)
			}

			// A signal from outside.
			p = start(t, r, sh("sleep 100"))
			firstPid := p.Pid()
			time.Sleep(50 * time.Millisecond)
			_ = syscall.Kill(firstPid, syscall.SIGKILL)
			res = p.Wait()
			if res.Status != StatusKilled || res.Signal != "SIGKILL" {
				t.Errorf("outside kill: %s %q", res.Status, res.Signal)
			}
		})
	}
}

// The main invariant: nothing an execution started survives its end, whether
// it ends by timeout, cancel or a normal exit, and whether the leftover was
// double-forked or moved to its own session.
func TestNothingSurvives(t *testing.T) {
	const setsidChild = `setsid sleep 300 & echo $!`
	const doubleFork = `( sleep 300 & echo $! ) `
	for _, m := range modes(t) {
		for _, spawn := range []struct{ name, script string }{{"setsid", setsidChild}, {"doublefork", doubleFork}} {
			for _, end := range []string{"timeout", "cancel", "exit"} {
				t.Run(m.name+"/"+spawn.name+"/"+end, func(t *testing.T) {
					r := newRunner(t, m.opts)
					script := spawn.script + "; "
					switch end {
					case "exit":
						script += "exit 0"
					default:
						// Ignores SIGTERM, so the grace period must end in SIGKILL.
						script += `trap "" TERM; sleep 100`
					}
					s := sh(script)
					if end == "timeout" {
						s.Timeout = 700 * time.Millisecond
						s.Grace = 200 * time.Millisecond
					}
					p := start(t, r, s)
					gc := atoi(t, firstLine(t, p))
					if end != "exit" {
						assertAlive(t, gc, "grandchild")
						if !r.IsExecutionProcess(gc) {
							t.Errorf("IsExecutionProcess(grandchild) = false while running")
						}
					}
					if end == "cancel" {
						_ = p.Cancel()
					}
					res := p.Wait()
					want := map[string]Status{"timeout": StatusTimedOut, "cancel": StatusCancelled, "exit": StatusSucceeded}[end]
					if res.Status != want {
						t.Errorf("status %s, want %s (%+v)", res.Status, want, res)
					}
					assertGone(t, gc, "grandchild")
					assertGone(t, p.Pid(), "main process")
					if r.IsExecutionProcess(gc) {
						t.Errorf("IsExecutionProcess(grandchild) = true after the end")
					}
					r.cleanup.Wait() // removal runs after the result
					if res.CgroupPath != "" && exists(res.CgroupPath) {
						t.Errorf("cgroup %s left behind", res.CgroupPath)
					}
				})
			}
		}
	}
}

func TestPauseResumeCancel(t *testing.T) {
	const ticker = `setsid sh -c 'while :; do echo tick; sleep 0.02; done' & while :; do echo tock; sleep 0.02; done`
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			p := start(t, r, sh(ticker))
			firstLine(t, p)
			if err := p.Pause(); err != nil {
				t.Fatal(err)
			}
			if !p.Paused() {
				t.Fatal("Paused() = false after Pause")
			}
			time.Sleep(100 * time.Millisecond) // let in-flight output drain
			_, before, _ := p.ReadOutput(Stdout, 0, 0)
			time.Sleep(300 * time.Millisecond)
			_, after, _ := p.ReadOutput(Stdout, 0, 0)
			if after != before {
				t.Fatalf("output grew while paused: %d -> %d", before, after)
			}
			if err := p.Resume(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				if _, n, _ := p.ReadOutput(Stdout, 0, 0); n > after {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no output after Resume")
				}
				time.Sleep(10 * time.Millisecond)
			}
			// A paused execution can be cancelled.
			if err := p.Pause(); err != nil {
				t.Fatal(err)
			}
			_ = p.Cancel()
			res := p.Wait()
			if res.Status != StatusCancelled {
				t.Fatalf("status %s", res.Status)
			}
			if err := p.Pause(); err != ErrFinished {
				t.Errorf("Pause after end: %v", err)
			}
		})
	}
}

func TestTimeoutCountsWhilePaused(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			s := sh(`echo up; sleep 100`)
			s.Timeout = 600 * time.Millisecond
			s.Grace = 200 * time.Millisecond
			p := start(t, r, s)
			firstLine(t, p)
			if err := p.Pause(); err != nil {
				t.Fatal(err)
			}
			if res := p.Wait(); res.Status != StatusTimedOut {
				t.Fatalf("status %s", res.Status)
			}
		})
	}
}

func TestOutputCapHashAndCallback(t *testing.T) {
	r := newRunner(t, Options{NoCgroups: true})
	key := []byte("receipt-key")
	var mu sync.Mutex
	next := map[Stream]int64{}
	var order error
	s := Spec{
		Path:      "/usr/bin/head",
		Argv:      []string{"head", "-c", "3000000", "/dev/zero"},
		Timeout:   30 * time.Second,
		OutputCap: 1000,
		NewHash:   func() hash.Hash { return hmac.New(sha256.New, key) },
		OnOutput: func(st Stream, off int64, chunk []byte) {
			mu.Lock()
			defer mu.Unlock()
			if off != next[st] && order == nil {
				order = fmt.Errorf("%s chunk at %d, want %d", st, off, next[st])
			}
			next[st] = off + int64(len(chunk))
		},
	}
	p := start(t, r, s)
	res := p.Wait()
	if order != nil {
		t.Fatal(order)
	}
	if res.Stdout.Total != 3000000 || len(res.Stdout.Kept) != 1000 || !res.Stdout.Truncated || next[Stdout] != 3000000 {
		t.Fatalf("stdout: total %d kept %d truncated %v callback %d", res.Stdout.Total, len(res.Stdout.Kept), res.Stdout.Truncated, next[Stdout])
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(make([]byte, 3000000))
	if want := hex.EncodeToString(mac.Sum(nil)); res.Stdout.Digest != want {
		t.Fatalf("digest %s, want %s", res.Stdout.Digest, want)
	}
	empty := sha256.Sum256(nil)
	_ = empty
	if res.Stderr.Total != 0 || res.Stderr.Truncated {
		t.Fatalf("stderr: %+v", res.Stderr)
	}
	data, total, done := p.ReadOutput(Stdout, 990, 100)
	if len(data) != 10 || total != 3000000 || !done {
		t.Fatalf("ReadOutput past the end of kept: %d %d %v", len(data), total, done)
	}
}

func TestReadOutputWhileRunning(t *testing.T) {
	r := newRunner(t, Options{NoCgroups: true})
	p := start(t, r, sh(`echo hello; echo oops >&2; sleep 100`))
	if l := firstLine(t, p); l != "hello" {
		t.Fatalf("line %q", l)
	}
	data, total, done := p.ReadOutput(Stdout, 2, 2)
	if string(data) != "ll" || total != 6 || done {
		t.Fatalf("ReadOutput(2,2) = %q %d %v", data, total, done)
	}
	// sh writes stderr after stdout: cancelling before it did would race.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if e, _, _ := p.ReadOutput(Stderr, 0, -1); len(e) > 0 {
			break
		}
	}
	_ = p.Cancel()
	res := p.Wait()
	if _, _, done := p.ReadOutput(Stderr, 0, -1); !done || string(res.Stderr.Kept) != "oops\n" {
		t.Fatalf("stderr after end: %q done=%v", res.Stderr.Kept, done)
	}
}

func TestNoNetwork(t *testing.T) {
	if !Probe().NetNS {
		t.Skip("no network namespaces here")
	}
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			s := sh(`readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1`)
			s.NoNetwork = true
			res := start(t, r, s).Wait()
			lines := strings.Fields(string(res.Stdout.Kept))
			mine, _ := os.Readlink("/proc/self/ns/net")
			if !res.NetNSApplied || len(lines) != 2 || lines[0] == mine || lines[1] != "lo" {
				t.Fatalf("want a fresh netns with only lo: applied=%v %q (ours %s) %v", res.NetNSApplied, res.Stdout.Kept, mine, res.Err)
			}
		})
	}
}

func TestCredential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			s := sh(`id -u; id -g; id -G`)
			s.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{65534}}
			res := start(t, r, s).Wait()
			if res.Status != StatusSucceeded || string(res.Stdout.Kept) != "65534\n65534\n65534\n" {
				t.Fatalf("%s %q %q %v", res.Status, res.Stdout.Kept, res.Stderr.Kept, res.Err)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	r := newRunner(t, Options{})
	if r.CgroupParent() == "" {
		t.Skip("no cgroups")
	}
	// pids: limits hold from birth, forks beyond the limit fail.
	s := sh(`cat /proc/self/cgroup`)
	s.PidsMax = 4
	s.MemoryMax = 64 << 20
	res := start(t, r, s).Wait()
	if len(res.Limits) == 0 {
		t.Skip("no pids or memory controller here (v2 or v1)")
	}
	t.Logf("limits %v; cgroups of a child:\n%s", res.Limits, res.Stdout.Kept)
	// Every limited hierarchy holds the child from birth.
	for _, l := range res.Limits {
		ctl := "pids"
		if strings.Contains(l, "memory") {
			ctl = "memory"
		}
		want := ctl + ":"
		if strings.HasPrefix(l, "v2:") {
			want = "0::"
		}
		found := false
		for _, line := range strings.Split(string(res.Stdout.Kept), "\n") {
			i := strings.Index(line, ":")
			if i >= 0 && (strings.HasPrefix(line, want) || strings.HasPrefix(line[i+1:], want)) {
				found = strings.Contains(line, filepath.Base(r.CgroupParent())+"/"+filepath.Base(res.CgroupPath))
			}
		}
		if !found {
			t.Errorf("limit %s: child not inside its cgroup: %s", l, res.Stdout.Kept)
		}
	}
	var running int
	s = sh(`n=0; for i in 1 2 3 4 5 6 7 8; do if sleep 1 & then n=$((n+1)); fi; done 2>/dev/null; echo $n`)
	s.PidsMax = 4
	res = start(t, r, s).Wait()
	if f := strings.Fields(string(res.Stdout.Kept)); len(f) > 0 {
		running = atoi(t, f[0])
	}
	if running >= 8 {
		t.Errorf("pids.max=4 did not stop forks: %d sleeps started (stderr %q)", running, res.Stderr.Kept)
	}

	// memory: a command that grabs 256 MiB under a 32 MiB limit is OOM-killed.
	s = sh(`x=$(head -c 268435456 /dev/zero | tr '\0' a); echo ${#x}`)
	s.MemoryMax = 32 << 20
	res = start(t, r, s).Wait()
	hasMem := false
	for _, l := range res.Limits {
		hasMem = hasMem || strings.Contains(l, "memory")
	}
	if !hasMem {
		t.Logf("no memory controller: %v", res.Limits)
		return
	}
	if res.Status == StatusSucceeded {
		t.Errorf("256 MiB under a 32 MiB limit succeeded: %q", res.Stdout.Kept)
	}
}

func TestIsExecutionProcess(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			p := start(t, r, sh(`setsid sleep 300 & echo $!; sleep 300`))
			gc := atoi(t, firstLine(t, p))
			if !r.IsExecutionProcess(p.Pid()) || !r.IsExecutionProcess(gc) {
				t.Error("main and grandchild must be execution processes")
			}
			if r.IsExecutionProcess(os.Getpid()) || r.IsExecutionProcess(1) {
				t.Error("the daemon and init are not execution processes")
			}
			other := exec.Command("/bin/sleep", "5")
			if err := other.Start(); err != nil {
				t.Fatal(err)
			}
			if r.IsExecutionProcess(other.Process.Pid) {
				t.Error("an unrelated child is not an execution process")
			}
			_ = other.Process.Kill()
			_ = other.Wait()
			_ = p.Cancel()
			p.Wait()
			assertGone(t, gc, "grandchild")
		})
	}
}

func TestKillLeftovers(t *testing.T) {
	// Simulate a daemon crash: processes started in an execution cgroup (or
	// just a process group) by someone else, with nobody waiting for them.
	for _, pooled := range []bool{false, true} {
		t.Run(fmt.Sprintf("cgroup pooled=%v", pooled), func(t *testing.T) { killCgroupLeftovers(t, pooled) })
	}
	t.Run("pgid", func(t *testing.T) {
		cmd := exec.Command("/bin/sh", "-c", `setsid sleep 300 & echo $!; sleep 300`)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 32)
		n, _ := out.Read(buf)
		gc := atoi(t, string(buf[:n]))
		pid, st := cmd.Process.Pid, uint64(0)
		if pi, ok := proctree.Read(pid); ok {
			st = pi.Start
		}
		if err := KillLeftoversStrict(pid, st+1, ""); err != nil {
			t.Fatal(err)
		}
		assertAlive(t, gc, "grandchild (wrong start time must not kill)")
		if err := KillLeftoversStrict(pid, 0, ""); err != nil {
			t.Fatal(err)
		}
		assertAlive(t, gc, "grandchild (an unknown start time must not kill by pid)")
		if err := KillLeftoversStrict(pid, st, ""); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		waitGone(t, gc)
	})
	if err := KillLeftoversStrict(0, 0, "/tmp"); err == nil {
		t.Error("a non-cgroup directory must be refused")
	}
}

// waitGone allows for the orphan being reaped by whoever is its parent now.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		pi, ok := proctree.Read(pid)
		if !ok {
			return
		}
		if pi.State == 'Z' && pi.PPid == os.Getpid() {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		time.Sleep(10 * time.Millisecond)
	}
	assertGone(t, pid, "leftover")
}

func TestProbe(t *testing.T) {
	c := Probe()
	t.Logf("capabilities: %+v", c)
	if c.CgroupV2 != "" && !exists(filepath.Join(c.CgroupV2, "cgroup.procs")) {
		t.Errorf("v2 mount %s has no cgroup.procs", c.CgroupV2)
	}
	if !c.Subreaper {
		t.Error("TestMain enabled the subreaper but Probe does not see it")
	}
}

// Without cgroups, one execution's cleanup must not kill another live
// execution's processes, and both must be gone once both have ended.
func TestFallbackConcurrentExecutions(t *testing.T) {
	r := newRunner(t, Options{NoCgroups: true})
	a := start(t, r, sh(`setsid sleep 300 & echo $!; sleep 100`))
	gcA := atoi(t, firstLine(t, a))
	b := start(t, r, sh(`setsid sleep 300 & echo $!; sleep 0.3`))
	gcB := atoi(t, firstLine(t, b))
	if res := b.Wait(); res.Status != StatusSucceeded {
		t.Fatalf("b: %s", res.Status)
	}
	assertAlive(t, gcA, "a's grandchild after b ended")
	assertGone(t, gcB, "b's grandchild (seen by b's tracker)")
	_ = a.Cancel()
	a.Wait()
	assertGone(t, gcA, "a's grandchild")
}

// Two daemons in one cgroup share the executions' parent; the one that stops
// first removes it (it made it and it is empty). The other must keep running
// commands, with their limits.
func TestSharedParentRemovedByAnotherRunner(t *testing.T) {
	first := newRunner(t, Options{})
	if first.CgroupParent() == "" {
		t.Skip("no cgroups")
	}
	// Without a pool: pooled cgroups would keep the shared parent busy.
	second, err := NewWithOptions(Options{CgroupParent: first.CgroupParent(), NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first.CgroupParent()); !os.IsNotExist(err) {
		t.Fatalf("the first runner did not remove its empty parent (%v): this test would prove nothing", err)
	}
	s := sh(`echo ok`)
	s.PidsMax = 16
	s.MemoryMax = 64 << 20
	res := start(t, second, s).Wait()
	if res.Status != StatusSucceeded || strings.TrimSpace(string(res.Stdout.Kept)) != "ok" {
		t.Fatalf("after the shared parent was removed: status %v err %v stdout %q", res.Status, res.Err, res.Stdout.Kept)
	}
	t.Logf("limits %v", res.Limits)
}

// A spawning thread whose own v1 cgroup is gone returns to the hierarchy's
// root instead of ending; one that cannot leave at all ends only after the
// execution: the child's Pdeathsig fires when the thread that forked it ends,
// so ending the thread at once SIGKILLed the command.
func TestStuckSpawnThreadDoesNotKillChild(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for cgroups")
	}
	run := func(t *testing.T, r *Runner) {
		for i := 0; i < 3; i++ {
			s := sh(`sleep 0.2; echo alive`)
			s.PidsMax = 16
			res := start(t, r, s).Wait()
			if res.Status != StatusSucceeded || strings.TrimSpace(string(res.Stdout.Kept)) != "alive" {
				t.Fatalf("run %d: status %s signal %q err %v stdout %q: the child died with its spawning thread", i, res.Status, res.Signal, res.Err, res.Stdout.Kept)
			}
		}
	}
	t.Run("own cgroup gone", func(t *testing.T) {
		r := newRunner(t, Options{})
		if r.tree.V1Parents["pids"] == "" {
			t.Skip("no v1 pids hierarchy (not a hybrid host)")
		}
		// Writing the thread back fails (a plain directory has no tasks file).
		r.tree.OwnV1["pids"] = t.TempDir()
		run(t, r)
	})
	t.Run("no way out", func(t *testing.T) {
		c := Probe()
		if c.CgroupV2 == "" {
			t.Skip("no cgroups")
		}
		r, err := NewWithOptions(Options{CgroupParent: filepath.Join(c.CgroupV2, fmt.Sprintf("termd-test-%d-%d", os.Getpid(), parentSeq.Add(1)))})
		if err != nil {
			t.Fatal(err)
		}
		// A thread that ran on the main thread is parked there for good (Go
		// never ends the main thread), keeping its cgroup busy: clean up
		// what can be.
		defer func() { _ = r.Close() }()
		if r.tree.V1Parents["pids"] == "" {
			t.Skip("no v1 pids hierarchy (not a hybrid host)")
		}
		r.tree.OwnV1["pids"], r.tree.V1Roots["pids"] = t.TempDir(), t.TempDir()
		run(t, r)
	})
}

// killCgroupLeftovers: an execution's cgroup, made at spawn (x-<id>) or taken
// from the pool (p-…), as the intent names it.
func killCgroupLeftovers(t *testing.T, pooled bool) {
	r := newRunner(t, Options{NoV1: true, NoPool: !pooled})
	if r.CgroupParent() == "" {
		t.Skip("no cgroups")
	}
	var dir string
	if pooled {
		waitPool(t, r, 0, 1)
		dir = r.ReserveCgroup("crashed")
		if !strings.HasPrefix(filepath.Base(dir), pool.Prefix) || !exists(dir) {
			t.Fatalf("reserved %s: want an existing pooled cgroup", dir)
		}
	} else {
		dir = r.ReserveCgroup("crashed")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `setsid sleep 300 & echo $!; sleep 300`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: fd}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	gc := atoi(t, string(buf[:n]))
	if err := KillLeftoversStrict(cmd.Process.Pid, 0, dir); err != nil { // the cgroup alone
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, gc)
	if exists(dir) {
		t.Errorf("cgroup %s not removed", dir)
	}
}

// Executions ending together share the /proc scan that reaps their orphans
// (reapFor), and skip it when their pids controller charges no task: each
// one's double-forked grandchild must still be gone, not a zombie, by the
// time its own Wait returns.
func TestOrphansReapedWhenManyEndTogether(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			const n = 12
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := sh(`( sleep 300 & echo $! ); sleep 0.2`)
					s.PidsMax = 64 // a pids controller: its count says whether a zombie is left (noTasksCharged)
					p := start(t, r, s)
					gc := atoi(t, firstLine(t, p))
					if res := p.Wait(); res.Status != StatusSucceeded {
						t.Errorf("status %s", res.Status)
					}
					assertGone(t, gc, "grandchild")
				}()
			}
			wg.Wait()
		})
	}
}
