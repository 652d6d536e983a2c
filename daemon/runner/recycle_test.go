//go:build linux

package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/runner/pool"
)

// An ended execution's pooled cgroup serves the next one (pool.Cgroups.Recycle)
// only once nothing of it is left. With the refill held back, 3*pool.Size
// executions all run in the pool's pool.Size cgroups: two leave processes
// behind, which are killed, and their cgroups are removed, never reused
// (after a cgroup.kill this kernel SIGKILLs whatever is cloned into the
// cgroup later); the others list who is in their cgroups and find
// themselves alone, under their own limits. A pids limit of 1 holds: the v1
// pids.max the spawning thread raised by one is lowered again and known to
// be (a reused cgroup that thought it still held the raised value would not
// raise it, and the fork would fail).
func TestRecycledCgroupsServeNextExecutionClean(t *testing.T) {
	r := newRunner(t, Options{})
	if r.CgroupParent() == "" {
		t.Skip("no cgroups")
	}
	waitPool(t, r, 0, pool.Size)
	r.holdRefill() // every cgroup from here on is one of these or recycled
	defer r.releaseRefill()
	paths, killed := map[string]bool{}, map[string]bool{}
	for i := range 3 * pool.Size {
		id := fmt.Sprintf("recycle-%d", i)
		path := r.ReserveCgroup(id)
		if killed[path] {
			t.Fatalf("execution %d was given cgroup %s, where an earlier one's leftovers were killed", i, path)
		}
		leaves := i == 0 || i == pool.Size+1
		pids, mem := int64(1+i%3), int64(64+16*(i%4))<<20
		s := Spec{Path: "/bin/cat", Argv: append([]string{"cat"}, cgroupFiles(r, path)...), Timeout: 30 * time.Second}
		if leaves { // a process in a session of its own, and one in its group
			s, pids = sh(`setsid sleep 60 & sleep 60 & echo started`), 8
		}
		s.ID, s.PidsMax, s.MemoryMax = id, pids, mem
		p := start(t, r, s)
		res := p.Wait()
		p.Delivered()
		r.cleanup.Wait() // its cgroup is recycled or removed in the background
		if !strings.HasPrefix(filepath.Base(res.CgroupPath), pool.Prefix) || res.CgroupPath != path {
			t.Fatalf("execution %d ran in cgroup %q (reserved %q), not a pooled one: %s", i, res.CgroupPath, path, r.PoolStatus())
		}
		paths[path] = true
		if res.Status != StatusSucceeded {
			t.Fatalf("execution %d (pids %d) in cgroup %s: %s %s %v, stderr %q", i, pids, path, res.Status, res.Signal, res.Err, res.Stderr.Kept)
		}
		if !leaves {
			checkAlone(t, i, p.Pid(), pids, mem, string(res.Stdout.Kept), res.Limits)
			continue
		}
		if res.Leftovers == 0 {
			t.Fatalf("execution %d: its background processes were not found at its end: %+v", i, res)
		}
		killed[path] = true
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("execution %d's cgroup %s, where its leftovers were killed, was kept (stat: %v)", i, path, err)
		}
	}
	if len(paths) > pool.Size {
		t.Errorf("%d executions used %d cgroups; with the refill held back the pool's %d should have served them all", 3*pool.Size, len(paths), pool.Size)
	}
}

// cgroupFiles are the membership and limit files of the execution cgroup
// path in every hierarchy the runner uses, in the order checkAlone reads
// them: "<hierarchy>:<file>" lines of cat's output.
func cgroupFiles(r *Runner, path string) []string {
	files := []string{filepath.Join(path, "cgroup.procs")}
	name := filepath.Base(path)
	if d := r.tree.V1Parents["pids"]; d != "" {
		files = append(files, filepath.Join(d, name, "cgroup.procs"))
	}
	if d := r.tree.V1Parents["memory"]; d != "" {
		files = append(files, filepath.Join(d, name, "cgroup.procs"), filepath.Join(d, name, "memory.limit_in_bytes"))
	}
	return files
}

// checkAlone reads cat's output of cgroupFiles: every membership list holds
// the execution's own process only (and, in v1, maybe the spawning thread
// of this test process, until it has left), and the memory limit read is
// the execution's own, as are the limits it reports.
func checkAlone(t *testing.T, i, pid int, pids, mem int64, out string, limits []string) {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	var seenMem bool
	for _, line := range strings.Fields(out) {
		n, err := strconv.ParseInt(line, 10, 64)
		switch {
		case err != nil:
			t.Fatalf("execution %d: unexpected line %q in %q", i, line, out)
		case n == mem:
			seenMem = true
		case line != strconv.Itoa(pid) && line != self:
			t.Errorf("execution %d (pid %d) shares its cgroup with process %s (output %q)", i, pid, line, out)
		}
	}
	want := map[string]bool{}
	for _, l := range limits {
		_, v, _ := strings.Cut(l, "=")
		want[v] = true
	}
	if !want[strconv.FormatInt(pids, 10)] || !want[strconv.FormatInt(mem, 10)] {
		t.Errorf("execution %d asked for pids %d memory %d, applied %v", i, pids, mem, limits)
	}
	if strings.Contains(strings.Join(limits, " "), "v1:memory") && !seenMem {
		t.Errorf("execution %d: its v1 memory limit is not %d in its cgroup (output %q)", i, mem, out)
	}
}

// A cgroup still charged with more than cgroup.MaxLeftoverMemory when its
// execution ends (here a file its command left on a tmpfs) is removed, not
// reused: the next execution would have less than its memory limit.
func TestCgroupWithLeftoverMemoryNotRecycled(t *testing.T) {
	r := newRunner(t, Options{})
	if r.CgroupParent() == "" {
		t.Skip("no cgroups")
	}
	shm := filepath.Join("/dev/shm", fmt.Sprintf("termd-recycle-%d", os.Getpid()))
	t.Cleanup(func() { os.Remove(shm) })
	waitPool(t, r, 0, pool.Size)
	r.holdRefill()
	defer r.releaseRefill()
	run := func(id, script string) Result {
		s := sh(script)
		s.ID, s.PidsMax, s.MemoryMax = id, 16, 256<<20
		p := start(t, r, s)
		res := p.Wait()
		p.Delivered()
		r.cleanup.Wait() // its cgroup is recycled or removed in the background
		if res.Status != StatusSucceeded {
			t.Fatalf("%s: %s %v %q", id, res.Status, res.Err, res.Stderr.Kept)
		}
		return res
	}
	clean := run("clean", `true`)
	if _, err := os.Stat(clean.CgroupPath); err != nil {
		t.Fatalf("the cgroup of an execution that left nothing was not kept for reuse: %v", err)
	}
	if !strings.Contains(strings.Join(clean.Limits, " "), "memory") {
		t.Skip("no memory controller here (v2 or v1): nothing is charged")
	}
	dirty := run("dirty", `head -c 8388608 /dev/zero > `+shm)
	if _, err := os.Stat(dirty.CgroupPath); !os.IsNotExist(err) {
		t.Errorf("the cgroup still charged with an 8 MiB tmpfs file was kept for reuse (stat: %v)", err)
	}
}

// One cgroup serving executions with limits, none, and the limits again
// holds them exactly each time: a v1 directory removed for the execution
// without limits and made again for the next one starts with no limit,
// whatever the cgroup wrote into its predecessor.
func TestRecycledCgroupLimitsAfterNone(t *testing.T) {
	r := newRunner(t, Options{})
	if r.CgroupParent() == "" {
		t.Skip("no cgroups")
	}
	waitPool(t, r, 0, pool.Size)
	r.holdRefill()
	defer r.releaseRefill()
	for i := range pool.Size - 1 { // held aside: one cgroup is left to serve them all
		r.ReserveCgroup(fmt.Sprintf("aside-%d", i))
	}
	var first string
	for i, mib := range []int64{64, 0, 64, 0, 32} {
		id := fmt.Sprintf("limits-%d", i)
		path := r.ReserveCgroup(id)
		if first == "" {
			first = path
		}
		if path != first {
			t.Fatalf("execution %d got cgroup %s, not the one recycled (%s): %s", i, path, first, r.PoolStatus())
		}
		s := sh(`true`)
		s.ID, s.PidsMax, s.MemoryMax = id, mib/4, mib<<20
		p := start(t, r, s)
		res := p.Wait()
		p.Delivered()
		r.cleanup.Wait() // its cgroup is recycled or removed in the background
		if res.Status != StatusSucceeded {
			t.Fatalf("execution %d: %s %v", i, res.Status, res.Err)
		}
		if mib > 0 && len(res.Limits) == 0 {
			t.Skip("no pids or memory controller here (v2 or v1)")
		}
		if mib == 0 && len(res.Limits) != 0 {
			t.Errorf("execution %d asked for no limit; applied %v", i, res.Limits)
		}
		name := filepath.Base(path)
		for _, l := range res.Limits {
			key, want, _ := strings.Cut(l, "=")
			file := filepath.Join(path, strings.TrimPrefix(key, "v2:"))
			if f, ok := strings.CutPrefix(key, "v1:"); ok {
				file = filepath.Join(r.tree.V1Parents[strings.Split(f, ".")[0]], name, f)
			}
			if data, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(data)) != want {
				t.Errorf("execution %d applied %s; %s holds %q (%v)", i, l, file, data, err)
			}
		}
	}
}

// More executions in flight together than the cgroup pool holds: each is
// still reserved a pooled cgroup (made then, not x-<id>), and at their end
// all go back to the pool, so the next as many executions are served by
// them without a cgroup made or removed (before, each execution beyond the
// pool's made and removed one).
func TestCgroupPoolGrowsToExecutionsInFlight(t *testing.T) {
	r := newRunner(t, Options{})
	if r.CgroupParent() == "" {
		t.Skip("no cgroups")
	}
	waitPool(t, r, 0, pool.Size)
	r.holdRefill() // no filler: what the pool holds after the first batch is what came back
	defer r.releaseRefill()
	n := 3 * pool.Size
	batch := func(round int) map[string]bool {
		// Each waits for the gate (all n in flight at once), or for its
		// directory's removal at the end of a failed test.
		dir := t.TempDir()
		gate := filepath.Join(dir, "go")
		paths := map[string]bool{}
		var procs []*Process
		for i := range n {
			s := sh("while [ -d " + dir + " ] && [ ! -e " + gate + " ]; do sleep 0.01; done")
			s.ID, s.PidsMax = fmt.Sprintf("inflight-%d-%d", round, i), 8
			path := r.ReserveCgroup(s.ID)
			if !strings.HasPrefix(filepath.Base(path), pool.Prefix) {
				t.Fatalf("round %d: execution %d of %d in flight was reserved %s, not a pooled cgroup: %s", round, i, n, path, r.PoolStatus())
			}
			paths[path] = true
			procs = append(procs, start(t, r, s))
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if res := p.Wait(); res.Status != StatusSucceeded {
				t.Fatalf("round %d: %s %v", round, res.Status, res.Err)
			}
			p.Delivered()
		}
		r.cleanup.Wait()
		return paths
	}
	first := batch(0)
	if len(first) != n {
		t.Fatalf("%d executions in flight shared %d cgroups", n, len(first))
	}
	if got := r.cgPool.Ready(); got != n {
		t.Fatalf("after %d executions in flight the pool holds %d cgroups, not all of theirs: %s", n, got, r.PoolStatus())
	}
	for path := range batch(1) {
		if !first[path] {
			t.Errorf("the second batch was given %s, made anew, while the first batch's were back in the pool: %s", path, r.PoolStatus())
		}
	}
}
