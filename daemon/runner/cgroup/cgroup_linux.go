package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroup is the set of cgroups one execution lives in: one v2 cgroup (the
// primary: membership at clone time, kill, freeze, limits when v2 has
// controllers) and, on hybrid hosts, optional v1 pids/memory cgroups for limits.
type Cgroup struct {
	v2      string            // absolute dir in the v2 hierarchy
	v1      map[string]string // controller -> absolute dir
	kill    bool              // cgroup.kill exists
	freeze  bool              // cgroup.freeze exists
	applied []string          // limits actually written, e.g. "pids.max=64"
	// controllers are the v2 controllers of v2; written holds the values
	// written to limit files (path -> value), so none is written twice.
	controllers []string
	written     map[string]string
	pidsMax     int64 // v1 pids.max to settle once the spawning thread left
	// stuck: the spawning thread could not leave the v1 cgroups; it stays in
	// them (counted in pids.max) until the execution ends.
	stuck bool
	// joined: its process is moved into its v1 cgroups after the fork
	// (JoinV1, a pooled launcher's), so no thread of ours ever counts in
	// its v1 pids.max; inV1 are the v1 directories it was moved into.
	joined bool
	inV1   map[string]bool
	// killed: KillAll ran (its execution left processes behind). Such a
	// cgroup is not reused (Reset): after a cgroup.kill this kernel
	// SIGKILLs every process later cloned into it (CLONE_INTO_CGROUP; a
	// move by cgroup.procs is spared), and an execution that left
	// processes is not one whose cgroup needs to be quick to reuse.
	killed bool
	// open: the files read at the execution's end (v2 cgroup.events, v1
	// cgroup.procs), opened when the directories were made (for a pooled
	// cgroup, ahead of its execution), so that the end reads them without a
	// path walk each (by path: ~60 us and ~25 us each at p50 on a busy
	// 2-core machine, most of the teardown after the exit); closed by
	// Remove. A v1 cgroup.procs descriptor serves one read: read again it
	// would give the pid list loaded at its first read (cgroup v1 keeps it
	// about a second), so it is closed after it and later reads open the file.
	open map[string]openFile
}

// Limits are an execution's pids and memory limits (0: none).
type Limits struct {
	Pids   int64 // tasks
	Memory int64 // bytes
}

// Path is the v2 cgroup's directory.
func (cg *Cgroup) Path() string { return cg.v2 }

// Applied lists the limits written, e.g. "v2:pids.max=64".
func (cg *Cgroup) Applied() []string { return cg.applied }

// CanFreeze: the v2 cgroup has cgroup.freeze.
func (cg *Cgroup) CanFreeze() bool { return cg.freeze }

// MarkStuck records that the spawning thread could not leave the v1
// cgroups: it stays counted in pids.max, so Settle leaves the limit as is.
func (cg *Cgroup) MarkStuck() { cg.stuck = true }

// openFile is a cgroup file kept open (Cgroup.open).
type openFile struct {
	fd   int
	once bool // serves one read
}

// keepOpen opens path for reads at the execution's end (readFile), for one
// read only with once; best effort.
func (cg *Cgroup) keepOpen(path string, once bool) {
	if _, ok := cg.open[path]; ok {
		return
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	if cg.open == nil {
		cg.open = map[string]openFile{}
	}
	cg.open[path] = openFile{fd, once}
}

// readFile reads a cgroup file: from the start of its descriptor kept open
// (kernfs renders it afresh at offset 0), else by opening it.
func (cg *Cgroup) readFile(path string) ([]byte, error) {
	f, ok := cg.open[path]
	if !ok {
		return readFresh(path)
	}
	fd := f.fd
	if f.once {
		delete(cg.open, path)
		defer unix.Close(fd)
	}
	return preadAll(fd, path)
}

// readKept reads a cgroup file that says what holds now at every read from
// offset 0 (a counter, not a v1 member list) through a descriptor kept
// open for the cgroup's life, opened at its first read: a pooled cgroup's
// recycle (Reset) reads its counters without an open each (an open and a
// close cost three times the read here).
func (cg *Cgroup) readKept(path string) ([]byte, error) {
	cg.keepOpen(path, false)
	return cg.readFile(path)
}

// forget closes the descriptors kept on files of dir (a v1 directory
// removed: made again later, it is another cgroup).
func (cg *Cgroup) forget(dir string) {
	for path, f := range cg.open {
		if filepath.Dir(path) == dir {
			unix.Close(f.fd)
			delete(cg.open, path)
		}
	}
}

// readFresh reads a cgroup file through a descriptor of its own. Not
// os.ReadFile: os.Open registers a cgroup file (it can be polled) with the
// runtime's poller and close deregisters it, and a stat sizes the buffer;
// here that doubles the CPU of a read (see writeFile).
func readFresh(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return preadAll(fd, path)
}

// preadAll reads fd from offset 0 to its end.
func preadAll(fd int, path string) ([]byte, error) {
	buf := make([]byte, 512)
	for off := 0; ; {
		if off == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		n, err := unix.Pread(fd, buf[off:], int64(off))
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf[:off], nil
		}
		off += n
	}
}

// closeFiles closes what keepOpen opened.
func (cg *Cgroup) closeFiles() {
	for path, f := range cg.open {
		unix.Close(f.fd)
		delete(cg.open, path)
	}
}

// liftV1 takes the limit off d, the ctl v1 cgroup its process is in
// (memsw first: it may never be below the memory limit).
func (cg *Cgroup) liftV1(ctl, d string) error {
	switch ctl {
	case "pids":
		return cg.set(filepath.Join(d, "pids.max"), "max")
	case "memory":
		_ = cg.set(filepath.Join(d, "memory.memsw.limit_in_bytes"), "-1") // absent without swap accounting
		return cg.set(filepath.Join(d, "memory.limit_in_bytes"), "-1")
	}
	return nil
}

// set writes v to a cgroup file unless cg already wrote that value there.
func (cg *Cgroup) set(path, v string) error {
	if w, ok := cg.written[path]; ok && w == v {
		return nil
	}
	if _, ok := cg.written[path]; !ok && v == "max" {
		return nil // a fresh cgroup has no limit
	}
	if err := writeFile(path, v); err != nil {
		delete(cg.written, path)
		return err
	}
	cg.written[path] = v
	return nil
}

// freshDir creates dir; a leftover empty cgroup of the same name is replaced, a
// populated one is an error (another execution, or leftovers to kill first).
//
// The parent is shared by every termd whose own cgroup is the same (two daemons
// started from one shell, test suites): when one of them stops it removes the
// parent if empty, so a parent found missing is made again (with its v2
// controllers) and the creation retried.
func freshDir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	for attempt := 0; errors.Is(err, os.ErrNotExist) && attempt < 10; attempt++ {
		parent := filepath.Dir(dir)
		if e := os.Mkdir(parent, 0o755); e != nil && !errors.Is(e, os.ErrExist) {
			return fmt.Errorf("create cgroup %s: its parent is gone and could not be made again: %w", dir, e)
		}
		enableControllers(parent)
		err = os.Mkdir(dir, 0o755)
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	if len(readPids(filepath.Join(dir, "cgroup.procs"))) > 0 {
		return fmt.Errorf("cgroup %s already has processes: kill leftovers first", dir)
	}
	if err := os.Remove(dir); err != nil {
		return fmt.Errorf("replace stale cgroup %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	return nil
}

// enterV1 moves the calling (locked) OS thread into the v1 cgroups, so that the
// child it forks next is born there: no window in which user code runs outside
// its limits. It returns a function that moves the thread back: to orig, or,
// when that is gone, to the hierarchy's root (roots), so that the thread is
// still fit for reuse.
func (cg *Cgroup) enterV1(orig, roots map[string]string) (leave func() error, err error) {
	if len(cg.v1) == 0 {
		return func() error { return nil }, nil
	}
	tid := strconv.Itoa(unix.Gettid())
	var moved []string
	back := func() error {
		var first error
		for _, ctl := range moved {
			e := writeFile(filepath.Join(orig[ctl], "tasks"), tid)
			if e != nil && roots[ctl] != "" {
				if writeFile(filepath.Join(roots[ctl], "tasks"), tid) == nil {
					e = nil
				}
			}
			if e != nil && first == nil {
				first = e
			}
		}
		return first
	}
	for ctl, d := range cg.v1 {
		if orig[ctl] == "" {
			_ = back()
			return nil, fmt.Errorf("no original v1 %s cgroup to return to", ctl)
		}
		if err := writeFile(filepath.Join(d, "tasks"), tid); err != nil {
			if e := back(); e != nil {
				return nil, fmt.Errorf("enter v1 %s cgroup: %v; and return failed: %w", ctl, err, e)
			}
			return nil, fmt.Errorf("enter v1 %s cgroup: %w", ctl, err)
		}
		moved = append(moved, ctl)
	}
	return back, nil
}

// JoinV1 moves process pid, a pooled launcher that has exec'd and waits for
// its execution (it forks nothing before), into the v1 cgroups it is not in
// yet (its execution's limits may need one its pooled cgroup did not have):
// one write a hierarchy, where a spawning thread's entering and leaving are
// two.
func (cg *Cgroup) JoinV1(pid int) error {
	for ctl, d := range cg.v1 {
		if cg.inV1[d] {
			continue
		}
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("enter v1 %s cgroup: %w", ctl, err)
		}
		if cg.inV1 == nil {
			cg.inV1 = map[string]bool{}
		}
		cg.inV1[d] = true
	}
	return nil
}

// Settle applies the final v1 pids.max once the spawning thread has left
// (recorded as written, so that a reused cgroup's next ApplyLimits knows
// what the file holds).
func (cg *Cgroup) Settle() {
	if d := cg.v1["pids"]; d != "" && cg.pidsMax > 0 && !cg.stuck {
		_ = cg.set(filepath.Join(d, "pids.max"), strconv.FormatInt(cg.pidsMax, 10))
	}
}

// MaxLeftoverMemory is the most memory an ended execution's cgroup may
// still have charged (kernel objects and page cache the kernel has not
// reclaimed yet) for Reset to let it serve another execution: the next one
// could otherwise be held to less than its limit by what the previous one
// left (tmpfs files, say, which cannot be reclaimed without swap).
const MaxLeftoverMemory = 1 << 20

// Reset readies the cgroup of an ended execution for the next one, as if
// Make had made it: true only when nothing of the ended execution is left
// in it (no member in v2 or any v1 hierarchy, no task charged: its zombies
// are reaped), nothing had to be killed in it (KillAll), it is not frozen,
// its spawning thread never got stuck in it, and at most MaxLeftoverMemory
// is charged to it. The limits written stay
// (the next ApplyLimits writes only what differs) and the names stay. false:
// do not reuse it (remove it).
func (cg *Cgroup) Reset() bool {
	if cg.v2 == "" || cg.stuck || cg.killed {
		return false
	}
	events, err := cg.readFile(filepath.Join(cg.v2, "cgroup.events"))
	if err != nil || !bytes.Contains(events, []byte("populated 0")) || cg.freeze && !bytes.Contains(events, []byte("frozen 0")) {
		return false
	}
	noTasks := cg.NoTasksCharged()
	if !noTasks && (cg.v1["pids"] != "" || cg.has("pids")) {
		return false
	}
	for ctl, d := range cg.v1 {
		if ctl == "pids" && noTasks {
			continue // pids.current 0: no task is in it (nor a zombie), so none is listed
		}
		if len(readPids(filepath.Join(d, "cgroup.procs"))) > 0 { // afresh: a kept descriptor may be stale
			return false
		}
	}
	if !cg.memoryBelow(MaxLeftoverMemory) {
		return false
	}
	cg.joined, cg.inV1, cg.applied, cg.pidsMax = false, nil, nil, 0
	for _, d := range cg.v1 {
		cg.keepOpen(filepath.Join(d, "cgroup.procs"), true)
	}
	return true
}

// memoryBelow: every memory counter of cg (v2 memory.current, v1
// memory.usage_in_bytes) reads at most n bytes; a counter that cannot be
// read is not below.
func (cg *Cgroup) memoryBelow(n int64) bool {
	var files []string
	if cg.has("memory") {
		files = append(files, filepath.Join(cg.v2, "memory.current"))
	}
	if d := cg.v1["memory"]; d != "" {
		files = append(files, filepath.Join(d, "memory.usage_in_bytes"))
	}
	for _, f := range files {
		b, err := cg.readKept(f)
		if err != nil {
			return false
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil || v > n {
			return false
		}
	}
	return true
}

// Procs lists member processes across all our hierarchies, never ourselves.
func (cg *Cgroup) Procs() []int {
	self := os.Getpid()
	seen := map[int]bool{}
	var out []int
	add := func(dir string) {
		if dir == "" {
			return
		}
		for _, p := range readPids(filepath.Join(dir, "cgroup.procs")) {
			if p != self && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	add(cg.v2)
	for _, d := range cg.v1 {
		add(d)
	}
	return out
}

// Populated says whether any process is in the cgroups (cgroup.events, and
// the v1 member lists).
func (cg *Cgroup) Populated() bool {
	if cg.v2 == "" {
		return len(cg.Procs()) > 0
	}
	data, err := cg.readFile(filepath.Join(cg.v2, "cgroup.events"))
	if err == nil {
		if bytes.Contains(data, []byte("populated 0")) {
			// v1 groups hold the same processes; check them too for safety.
			// (Not ourselves: a stuck spawning thread keeps the daemon listed.)
			self := os.Getpid()
			for _, d := range cg.v1 {
				for _, pid := range cg.readPids(filepath.Join(d, "cgroup.procs")) {
					if pid != self {
						return true
					}
				}
			}
			return false
		}
		return true
	}
	return len(cg.Procs()) > 0
}

// EmptyV2: the v2 cgroup has no member process (cgroup.events says so).
func (cg *Cgroup) EmptyV2() bool {
	if cg.v2 == "" {
		return false
	}
	data, err := cg.readFile(filepath.Join(cg.v2, "cgroup.events"))
	return err == nil && bytes.Contains(data, []byte("populated 0"))
}

// signal sends sig to every member, once.
func (cg *Cgroup) signal(sig syscall.Signal) {
	for _, p := range cg.Procs() {
		_ = unix.Kill(p, sig)
	}
}

// KillAll kills every member and waits until the cgroup is empty (or timeout).
func (cg *Cgroup) KillAll(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	cg.killed = true
	if cg.kill {
		_ = writeFile(filepath.Join(cg.v2, "cgroup.kill"), "1")
	} else if cg.freeze {
		// Freeze first so nobody forks while we walk the member list.
		_ = writeFile(filepath.Join(cg.v2, "cgroup.freeze"), "1")
	}
	for {
		if !cg.Populated() {
			return true
		}
		// Members that got in after cgroup.kill, or no cgroup.kill at all.
		cg.signal(syscall.SIGKILL)
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// SetFrozen writes cgroup.freeze and waits for cgroup.events to agree.
func (cg *Cgroup) SetFrozen(on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	if err := writeFile(filepath.Join(cg.v2, "cgroup.freeze"), v); err != nil {
		return err
	}
	want := []byte("frozen " + v)
	for i := 0; i < 1000; i++ {
		data, err := os.ReadFile(filepath.Join(cg.v2, "cgroup.events"))
		if err != nil || bytes.Contains(data, want) || bytes.Contains(data, []byte("populated 0")) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("cgroup %s did not reach %q", cg.v2, want)
}

// Remove deletes the (empty) cgroups, retrying briefly while the kernel
// finishes tearing down exited members.
func (cg *Cgroup) Remove() {
	cg.closeFiles()
	dirs := []string{cg.v2}
	for _, d := range cg.v1 {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		for i := 0; i < 200; i++ {
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// readPids is readPids through cg's open descriptors.
func (cg *Cgroup) readPids(path string) []int {
	data, err := cg.readFile(path)
	if err != nil {
		return nil
	}
	return parsePids(data)
}

func readPids(path string) []int {
	data, err := readFresh(path)
	if err != nil {
		return nil
	}
	return parsePids(data)
}

func parsePids(data []byte) []int {
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// writeFile writes v to a cgroup file. It uses the descriptor directly:
// os.OpenFile would register the file (a cgroup file can be polled) with
// the runtime's poller and deregister it at close, a quarter of the CPU of
// a write (perf, gRPC pairs of /bin/true).
func writeFile(path, v string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	_, err = unix.Write(fd, []byte(v))
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// NoTasksCharged reports whether the execution's pids controller (v1 on
// hybrid hosts, else v2) charges no task any more. A zombie stays charged to
// its cgroup until it is reaped, so once the main process is reaped, 0 means
// no orphan of this execution is left to reap and no /proc scan is needed.
// False when there is no pids controller to ask.
func (cg *Cgroup) NoTasksCharged() bool {
	dir := cg.v1["pids"]
	if dir == "" && slices.Contains(cg.controllers, "pids") {
		dir = cg.v2
	}
	if dir == "" {
		return false
	}
	b, err := cg.readKept(filepath.Join(dir, "pids.current"))
	return err == nil && strings.TrimSpace(string(b)) == "0"
}

// KillPath kills every process in the cgroup directory dir (v2 or v1) and
// removes it; a missing dir is no error, a directory that is not a cgroup is.
func KillPath(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC && st.Type != unix.CGROUP_SUPER_MAGIC {
		return fmt.Errorf("%s is not a cgroup directory", dir)
	}
	cg := &Cgroup{v2: dir, kill: exists(dir + "/cgroup.kill"), freeze: exists(dir + "/cgroup.freeze")}
	if st.Type == unix.CGROUP_SUPER_MAGIC {
		cg = &Cgroup{v1: map[string]string{"x": dir}}
		for i := 0; i < 5000 && len(cg.Procs()) > 0; i++ {
			cg.signal(syscall.SIGKILL)
			time.Sleep(2 * time.Millisecond)
		}
	} else if !cg.KillAll(10 * time.Second) {
		return fmt.Errorf("cgroup %s still has processes", dir)
	}
	cg.Remove()
	if exists(dir) {
		return fmt.Errorf("could not remove cgroup %s", dir)
	}
	return nil
}
