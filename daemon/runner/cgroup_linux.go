package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// execCgroup is the set of cgroups one execution lives in: one v2 cgroup (the
// primary: membership at clone time, kill, freeze, limits when v2 has
// controllers) and, on hybrid hosts, optional v1 pids/memory cgroups for limits.
type execCgroup struct {
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
	// (joinV1, a pooled launcher's), so no thread of ours ever counts in
	// its v1 pids.max; inV1 are the v1 directories it was moved into.
	joined bool
	inV1   map[string]bool
	// open: the files read at the execution's end (v2 cgroup.events, v1
	// cgroup.procs), opened when the directories were made (for a pooled
	// cgroup, ahead of its execution), so that the end reads them without a
	// path walk each (by path: ~60 us and ~25 us each at p50 on a busy
	// 2-core machine, most of the teardown after the exit); closed by
	// remove. A v1 cgroup.procs descriptor serves one read: read again it
	// would give the pid list loaded at its first read (cgroup v1 keeps it
	// about a second), so it is closed after it and later reads open the file.
	open map[string]openFile
}

// openFile is a cgroup file kept open (execCgroup.open).
type openFile struct {
	fd   int
	once bool // serves one read
}

// keepOpen opens path for reads at the execution's end (readFile), for one
// read only with once; best effort.
func (cg *execCgroup) keepOpen(path string, once bool) {
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
func (cg *execCgroup) readFile(path string) ([]byte, error) {
	f, ok := cg.open[path]
	if !ok {
		return os.ReadFile(path)
	}
	fd := f.fd
	if f.once {
		delete(cg.open, path)
		defer unix.Close(fd)
	}
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
func (cg *execCgroup) closeFiles() {
	for path, f := range cg.open {
		unix.Close(f.fd)
		delete(cg.open, path)
	}
}

// createCgroup makes the cgroups for one execution and writes its limits.
func (r *Runner) createCgroup(name string, spec Spec) (*execCgroup, error) {
	cg, err := r.makeCgroup(name, false)
	if err != nil {
		return nil, err
	}
	if err := r.applyLimits(cg, spec); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// makeCgroup makes the v2 directory of one execution (and, with allV1, a
// directory in every v1 hierarchy the Runner uses, for a pooled cgroup whose
// limits are not known yet). No limit is written.
func (r *Runner) makeCgroup(name string, allV1 bool) (*execCgroup, error) {
	cg := &execCgroup{v1: map[string]string{}, written: map[string]string{}}
	dir := filepath.Join(r.parent, name)
	if err := freshDir(dir); err != nil {
		return nil, err
	}
	cg.v2 = dir
	cg.keepOpen(filepath.Join(dir, "cgroup.events"), false)
	cg.kill = exists(filepath.Join(dir, "cgroup.kill"))
	cg.freeze = exists(filepath.Join(dir, "cgroup.freeze"))
	cg.controllers = readControllers(filepath.Join(dir, "cgroup.controllers"))
	if allV1 {
		for ctl, p := range r.v1Parents {
			d := filepath.Join(p, name)
			if err := freshDir(d); err != nil {
				cg.remove()
				return nil, err
			}
			cg.v1[ctl] = d
			cg.keepOpen(filepath.Join(d, "cgroup.procs"), true)
		}
	}
	return cg, nil
}

// applyLimits writes spec's pids and memory limits into cg (v2 where it has
// the controller, else v1, making the v1 directory when it is missing and
// removing v1 directories spec does not need) and records them in
// cg.applied. A value cg already holds is not written again, so a pooled
// cgroup whose limits were written ahead costs nothing here.
func (r *Runner) applyLimits(cg *execCgroup, spec Spec) error {
	name := filepath.Base(cg.v2)
	dir := cg.v2
	has := func(c string) bool {
		for _, x := range cg.controllers {
			if x == c {
				return true
			}
		}
		return false
	}
	cg.applied, cg.pidsMax = nil, 0
	if has("pids") {
		v := "max"
		if spec.PidsMax > 0 {
			v = strconv.FormatInt(spec.PidsMax, 10)
			cg.applied = append(cg.applied, "v2:pids.max="+v)
		}
		if err := cg.set(filepath.Join(dir, "pids.max"), v); err != nil {
			return err
		}
	}
	if has("memory") {
		v, swap := "max", "max"
		if spec.MemoryMax > 0 {
			// Without swap.max 0 the limit could be dodged by swapping.
			v, swap = strconv.FormatInt(spec.MemoryMax, 10), "0"
			cg.applied = append(cg.applied, "v2:memory.max="+v)
		}
		if err := cg.set(filepath.Join(dir, "memory.max"), v); err != nil {
			return err
		}
		_ = cg.set(filepath.Join(dir, "memory.swap.max"), swap)
	}
	// v1 limits only for what v2 could not do. A v1 directory spec does
	// not need is removed, unless a pre-started launcher was moved into it
	// (a pooled cgroup made with the limits of an execution that needed it):
	// then its limit is lifted and it goes with the cgroup at the end.
	v1 := func(ctl string, want bool) (string, error) {
		d := cg.v1[ctl]
		switch {
		case !want && d != "" && cg.inV1[d]:
			return "", cg.liftV1(ctl, d)
		case !want && d != "":
			delete(cg.v1, ctl)
			_ = os.Remove(d)
			return "", nil
		case !want || r.v1Parents[ctl] == "":
			return "", nil
		case d == "":
			d = filepath.Join(r.v1Parents[ctl], name)
			if err := freshDir(d); err != nil {
				return "", err
			}
			cg.v1[ctl] = d
			cg.keepOpen(filepath.Join(d, "cgroup.procs"), true)
		}
		return d, nil
	}
	d, err := v1("pids", spec.PidsMax > 0 && !has("pids"))
	if err != nil {
		return err
	}
	if d != "" {
		// +1: the spawning daemon thread sits in this cgroup while it forks
		// (settle lowers it after), unless the process joins it later.
		v := spec.PidsMax
		if !cg.joined {
			v++
			cg.pidsMax = spec.PidsMax
		}
		if err := cg.set(filepath.Join(d, "pids.max"), strconv.FormatInt(v, 10)); err != nil {
			return err
		}
		cg.applied = append(cg.applied, "v1:pids.max="+strconv.FormatInt(spec.PidsMax, 10))
	}
	if d, err = v1("memory", spec.MemoryMax > 0 && !has("memory")); err != nil {
		return err
	}
	if d != "" {
		v := strconv.FormatInt(spec.MemoryMax, 10)
		mem, memsw := filepath.Join(d, "memory.limit_in_bytes"), filepath.Join(d, "memory.memsw.limit_in_bytes")
		// memsw may never be below the memory limit: raise it first when
		// the limit written ahead was lower.
		if old, ok := cg.written[mem]; ok && len(old) > 0 {
			if n, _ := strconv.ParseInt(old, 10, 64); n < spec.MemoryMax {
				_ = cg.set(memsw, v)
			}
		}
		if err := cg.set(mem, v); err != nil {
			return err
		}
		_ = cg.set(memsw, v)
		cg.applied = append(cg.applied, "v1:memory.limit_in_bytes="+v)
	}
	return nil
}

// liftV1 takes the limit off d, the ctl v1 cgroup its process is in
// (memsw first: it may never be below the memory limit).
func (cg *execCgroup) liftV1(ctl, d string) error {
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
func (cg *execCgroup) set(path, v string) error {
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
func (cg *execCgroup) enterV1(orig, roots map[string]string) (leave func() error, err error) {
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

// joinV1 moves process pid, a pooled launcher that has exec'd and waits for
// its execution (it forks nothing before), into the v1 cgroups it is not in
// yet (its execution's limits may need one its pooled cgroup did not have):
// one write a hierarchy, where a spawning thread's entering and leaving are
// two.
func (cg *execCgroup) joinV1(pid int) error {
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

// settle applies the final v1 pids.max once the spawning thread has left.
func (cg *execCgroup) settle() {
	if d := cg.v1["pids"]; d != "" && cg.pidsMax > 0 && !cg.stuck {
		_ = writeFile(filepath.Join(d, "pids.max"), strconv.FormatInt(cg.pidsMax, 10))
	}
}

// procs lists member processes across all our hierarchies, never ourselves.
func (cg *execCgroup) procs() []int {
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

func (cg *execCgroup) populated() bool {
	if cg.v2 == "" {
		return len(cg.procs()) > 0
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
	return len(cg.procs()) > 0
}

// emptyV2: the v2 cgroup has no member process (cgroup.events says so).
func (cg *execCgroup) emptyV2() bool {
	if cg.v2 == "" {
		return false
	}
	data, err := cg.readFile(filepath.Join(cg.v2, "cgroup.events"))
	return err == nil && bytes.Contains(data, []byte("populated 0"))
}

// signal sends sig to every member, once.
func (cg *execCgroup) signal(sig syscall.Signal) {
	for _, p := range cg.procs() {
		_ = unix.Kill(p, sig)
	}
}

// killAll kills every member and waits until the cgroup is empty (or timeout).
func (cg *execCgroup) killAll(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	if cg.kill {
		_ = writeFile(filepath.Join(cg.v2, "cgroup.kill"), "1")
	} else if cg.freeze {
		// Freeze first so nobody forks while we walk the member list.
		_ = writeFile(filepath.Join(cg.v2, "cgroup.freeze"), "1")
	}
	for {
		if !cg.populated() {
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

// setFrozen writes cgroup.freeze and waits for cgroup.events to agree.
func (cg *execCgroup) setFrozen(on bool) error {
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

// remove deletes the (empty) cgroups, retrying briefly while the kernel
// finishes tearing down exited members.
func (cg *execCgroup) remove() {
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
func (cg *execCgroup) readPids(path string) []int {
	data, err := cg.readFile(path)
	if err != nil {
		return nil
	}
	return parsePids(data)
}

func readPids(path string) []int {
	data, err := os.ReadFile(path)
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

// lockedThread runs f on a fresh goroutine locked to its OS thread and
// returns when f has. If f returns a non-nil hold channel, the thread is
// tainted (it could not leave an execution's v1 cgroup): the goroutine stays
// locked until hold is closed and then exits still locked, so the Go runtime
// destroys the thread instead of reusing it. The wait matters: a child's
// Pdeathsig fires when the thread that forked it ends, so a tainted thread
// must outlive the child it started (hold = the execution's end).
func lockedThread(f func() (hold <-chan struct{})) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		hold := f()
		close(done)
		if hold != nil {
			<-hold
			return
		}
		runtime.UnlockOSThread()
	}()
	<-done
}
