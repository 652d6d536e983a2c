//go:build linux

package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/pool"
	"github.com/termd/termd/daemon/runner/proctree"
)

// waitPool waits until r's pools hold at least netns namespaces and cgroups
// cgroups ready.
func waitPool(t *testing.T, r *Runner, netns, cgroups int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, c := 0, 0
		if r.netns != nil {
			n = r.netns.Ready()
		}
		if r.cgPool != nil {
			c = r.cgPool.Ready()
		}
		if n >= netns && c >= cgroups {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spawn pools did not fill (want %d namespaces, %d cgroups): %s", netns, cgroups, r.PoolStatus())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// linesUntil waits until stdout has a line equal to last and returns what
// came before it.
func linesUntil(t *testing.T, p *Process, last string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		data, _, done := p.ReadOutput(Stdout, 0, -1)
		if before, _, ok := strings.Cut(string(data), last+"\n"); ok {
			return before
		}
		if done {
			t.Fatalf("stdout ended before %q: %q", last, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %q on stdout", last)
	return ""
}

// heldNetns lists the network namespaces this process holds descriptors to,
// other than its own ("net:[inode]" -> count).
func heldNetns(t *testing.T) map[string]int {
	t.Helper()
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, e := range entries {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "net:[") && l != own {
			m[l]++
		}
	}
	return m
}

// An execution with no network gets a namespace from the pool: nothing but a
// loopback device that is down, no route, never the daemon's and never one
// another execution had; the daemon lets go of it once the child is in it.
// Executions beyond what the pool holds make their own, with the same result.
func TestPooledNetworkNamespaces(t *testing.T) {
	if !Probe().NetNS {
		t.Skip("no network namespaces here")
	}
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			waitPool(t, r, pool.Size, 0)
			own, _ := os.Readlink("/proc/self/ns/net")
			pooled := heldNetns(t)
			if len(pooled) < pool.Size {
				t.Fatalf("the pool holds %d namespaces, want %d", len(pooled), pool.Size)
			}
			// More at once than the pool holds: some are made at spawn. They
			// all stay until the end, so no namespace (nor its inode number)
			// can be freed and made again while the test compares them.
			var procs []*Process
			for range pool.Size + 3 {
				s := sh(`readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1; cat /proc/net/route | wc -l; echo end; exec sleep 30`)
				s.NoNetwork = true
				p := start(t, r, s)
				t.Cleanup(func() { _ = p.Cancel(); p.Wait() })
				procs = append(procs, p)
			}
			seen := map[string]bool{}
			fromPool := 0
			for i, p := range procs {
				f := strings.Fields(linesUntil(t, p, "end"))
				if len(f) != 3 {
					t.Fatalf("execution %d: %q", i, f)
				}
				ns, devs, routes := f[0], f[1], f[2]
				if ns == own || devs != "lo" || routes != "0" {
					t.Errorf("execution %d: want a fresh namespace with only lo and no route; got %s (ours %s), devices %q, route lines %s", i, ns, own, devs, routes)
				}
				if seen[ns] {
					t.Errorf("execution %d: namespace %s was used twice", i, ns)
				}
				seen[ns] = true
				if pooled[ns] > 0 {
					fromPool++
				}
			}
			held := heldNetns(t)
			for ns := range seen {
				if held[ns] > 0 {
					t.Errorf("the daemon still holds namespace %s while its execution runs", ns)
				}
			}
			for i, p := range procs {
				_ = p.Cancel()
				if res := p.Wait(); !res.NetNSApplied {
					t.Errorf("execution %d: result says no network namespace", i)
				}
			}
			if fromPool == 0 {
				t.Errorf("no execution used a pooled namespace (pool %v, used %v)", pooled, seen)
			}
			t.Logf("%d of %d executions took a pooled namespace", fromPool, len(procs))
		})
	}
}

// A spawning thread that cannot go back to the daemon's network namespace
// must not fork anything else, and must not end while its child runs
// (Pdeathsig would kill the child).
func TestNetnsThreadStuckDoesNotKillChild(t *testing.T) {
	if !Probe().NetNS {
		t.Skip("no network namespaces here")
	}
	r := newRunner(t, Options{NoCgroups: true})
	waitPool(t, r, 3, 0)
	bad, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0) // setns refuses it
	if err != nil {
		t.Fatal(err)
	}
	// The spawning thread returns to the daemon's namespace through ownNet:
	// a descriptor setns refuses strands it in the execution's namespace.
	own := r.ownNet
	r.ownNet = bad
	t.Cleanup(func() { r.ownNet = own; unix.Close(bad) })
	for i := range 3 {
		s := sh(`sleep 0.2; echo alive`)
		s.NoNetwork = true
		res := start(t, r, s).Wait()
		if res.Status != StatusSucceeded || strings.TrimSpace(string(res.Stdout.Kept)) != "alive" || !res.NetNSApplied {
			t.Fatalf("run %d: status %s signal %q err %v stdout %q: the child died with its spawning thread", i, res.Status, res.Signal, res.Err, res.Stdout.Kept)
		}
	}
}

// Pooled cgroups carry each execution's own limits: the ones written ahead
// (the latest execution's), raised, lowered, or none.
func TestPooledCgroupLimits(t *testing.T) {
	r := newRunner(t, Options{})
	if r.CgroupParent() == "" {
		t.Skip("no cgroups")
	}
	// limits runs a command that stays until cancelled and reads its
	// cgroups' limit files meanwhile.
	limits := func(pids, mem int64) (map[string]string, Result) {
		t.Helper()
		waitPool(t, r, 0, 1)
		s := sh(`echo started; sleep 30`)
		s.PidsMax, s.MemoryMax = pids, mem
		p := start(t, r, s)
		if firstLine(t, p) != "started" {
			t.Fatal("no start")
		}
		if !strings.HasPrefix(filepath.Base(p.CgroupPath()), pool.Prefix) {
			t.Fatalf("cgroup %s is not a pooled one", p.CgroupPath())
		}
		got := map[string]string{}
		read := func(key, path string) {
			if data, err := os.ReadFile(path); err == nil {
				got[key] = strings.TrimSpace(string(data))
			}
		}
		read("v2:pids.max", filepath.Join(p.CgroupPath(), "pids.max"))
		read("v2:memory.max", filepath.Join(p.CgroupPath(), "memory.max"))
		name := filepath.Base(p.CgroupPath())
		if d := r.tree.V1Parents["pids"]; d != "" {
			read("v1:pids.max", filepath.Join(d, name, "pids.max"))
		}
		if d := r.tree.V1Parents["memory"]; d != "" {
			read("v1:memory.limit_in_bytes", filepath.Join(d, name, "memory.limit_in_bytes"))
		}
		_ = p.Cancel()
		return got, p.Wait()
	}
	check := func(pids, mem int64) {
		t.Helper()
		got, res := limits(pids, mem)
		if len(res.Limits) == 0 && (pids > 0 || mem > 0) {
			t.Skip("no pids or memory controller here (v2 or v1)")
		}
		for _, l := range res.Limits {
			key, want, _ := strings.Cut(l, "=")
			if got[key] != want {
				t.Errorf("pids %d memory %d: %s is %q in the cgroup, want %s (files %v)", pids, mem, key, got[key], want, got)
			}
		}
		if pids == 0 && mem == 0 {
			if len(res.Limits) != 0 {
				t.Errorf("no limits asked, got %v", res.Limits)
			}
			for k, v := range got {
				if strings.HasPrefix(k, "v2:") && v != "max" {
					t.Errorf("no limits asked, but %s is %s", k, v)
				}
				if strings.HasPrefix(k, "v1:") {
					t.Errorf("no limits asked, but the execution has a v1 cgroup with %s=%s", k, v)
				}
			}
		} else if len(res.Limits) == 0 {
			t.Errorf("pids %d memory %d: no limit applied", pids, mem)
		}
		t.Logf("pids %d memory %d: %v", pids, mem, res.Limits)
	}
	check(16, 64<<20)
	// Cycle the pool so the cgroups in it were made after that execution,
	// with its limits written ahead.
	for range pool.Size + 2 {
		waitPool(t, r, 0, 1)
		s := sh(`true`)
		s.PidsMax, s.MemoryMax = 16, 64<<20
		start(t, r, s).Wait()
	}
	waitPool(t, r, 0, pool.Size)
	ahead := 0
	entries, _ := os.ReadDir(r.CgroupParent())
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, pool.Prefix) {
			continue
		}
		for _, f := range []string{
			filepath.Join(r.CgroupParent(), name, "pids.max"),
			filepath.Join(r.tree.V1Parents["pids"], name, "pids.max"),
		} {
			// 17 in v1: one more for the spawning thread, until it leaves.
			if data, err := os.ReadFile(f); err == nil {
				if v := strings.TrimSpace(string(data)); v == "16" || v == "17" {
					ahead++
				}
			}
		}
	}
	if ahead == 0 {
		t.Errorf("no pooled cgroup has the latest limits written ahead")
	}
	check(16, 64<<20) // as written ahead
	check(32, 128<<20)
	check(8, 32<<20)
	check(0, 0)
	check(24, 48<<20)
}

// A termd that crashed leaves its pooled cgroups (and maybe a process in
// one); the next one to start in the same parent kills and removes them, and
// leaves a running termd's alone.
func TestStalePoolsRemovedAtStart(t *testing.T) {
	first := newRunner(t, Options{NoPool: true})
	if first.CgroupParent() == "" {
		t.Skip("no cgroups")
	}
	parent := first.CgroupParent()
	pi, _ := proctree.Read(os.Getpid())
	stale := fmt.Sprintf("%s%d-%d-7", pool.Prefix, os.Getpid(), pi.Start+1) // our pid, another start: a dead termd
	live := fmt.Sprintf("%s%d-%d-7", pool.Prefix, os.Getpid(), pi.Start)
	dirs := []string{parent}
	for _, d := range first.tree.V1Parents {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		for _, n := range []string{stale, live} {
			if err := os.Mkdir(filepath.Join(d, n), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer func() {
		for _, d := range dirs {
			_ = os.Remove(filepath.Join(d, live))
		}
	}()
	fd, err := syscall.Open(filepath.Join(parent, stale), syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	second, err := NewWithOptions(Options{CgroupParent: parent, NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the process left in a dead termd's pooled cgroup was not killed")
	}
	for _, d := range dirs {
		if exists(filepath.Join(d, stale)) {
			t.Errorf("stale pooled cgroup %s was not removed", filepath.Join(d, stale))
		}
		if !exists(filepath.Join(d, live)) {
			t.Errorf("a running termd's pooled cgroup %s was removed", filepath.Join(d, live))
		}
	}
}

// Close (the daemon's shutdown) lets go of every pooled namespace and
// removes every pooled cgroup.
func TestCloseEmptiesPools(t *testing.T) {
	c := Probe()
	if c.CgroupV2 == "" || !c.NetNS {
		t.Skip("needs cgroups and network namespaces")
	}
	before := len(heldNetns(t))
	parent := filepath.Join(c.CgroupV2, fmt.Sprintf("termd-test-%d-%d", os.Getpid(), parentSeq.Add(1)))
	r, err := NewWithOptions(Options{CgroupParent: parent})
	if err != nil {
		t.Fatal(err)
	}
	waitPool(t, r, pool.Size, pool.Size)
	if n := len(heldNetns(t)) - before; n < pool.Size {
		t.Fatalf("pool holds %d namespaces, want %d", n, pool.Size)
	}
	s := sh(`true`)
	s.PidsMax, s.MemoryMax, s.NoNetwork = 8, 32<<20, true
	start(t, r, s).Wait()
	waitPool(t, r, pool.Size, pool.Size)
	v1 := r.tree.V1Parents
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(heldNetns(t)) - before; n != 0 {
		t.Errorf("%d pooled namespaces still held after Close", n)
	}
	if exists(parent) {
		t.Errorf("cgroup parent %s still exists after Close", parent)
	}
	for ctl, d := range v1 {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), pool.Prefix) {
				t.Errorf("pooled v1 %s cgroup %s left after Close", ctl, e.Name())
			}
		}
	}
}

// The pools refill between executions (once an execution's result was
// delivered), not while one starts or runs: a refill (a launcher forked, a
// cgroup and a namespace made) competed with the command it refilled for,
// and with its receipt. An execution that keeps running stops holding the
// refill back after a while, so a long command never starves the pools.
func TestPoolsRefillBetweenExecutions(t *testing.T) {
	if !Probe().NetNS {
		t.Skip("no network namespaces here")
	}
	r := newRunner(t, Options{})
	if r.netns == nil {
		t.Fatalf("no network namespace pool: %s", r.PoolStatus())
	}
	waitPool(t, r, pool.Size, 0)
	r.young = time.Hour // it stays young for the whole test
	s := sh("exec sleep 30")
	s.NoNetwork = true
	p := start(t, r, s)
	t.Cleanup(func() { _ = p.Cancel(); p.Wait() })
	time.Sleep(300 * time.Millisecond)
	if n := r.netns.Ready(); n != pool.Size-1 {
		t.Fatalf("while an execution is young the namespace pool went from %d to %d: it refilled during the run", pool.Size, n)
	}
	_ = p.Cancel()
	p.Wait()
	time.Sleep(100 * time.Millisecond)
	if n := r.netns.Ready(); n != pool.Size-1 {
		t.Fatalf("the namespace pool refilled (%d) before the execution's result was delivered", n)
	}
	p.Delivered()
	waitPool(t, r, pool.Size, 0) // refilled once its result was delivered

	r.young = 50 * time.Millisecond
	long := start(t, r, s)
	t.Cleanup(func() { _ = long.Cancel(); long.Wait() })
	waitPool(t, r, pool.Size, 0) // a long run holds the refill back only while young
	select {
	case <-long.Done():
		t.Fatal("the execution ended before the pool refilled")
	default:
	}
}
