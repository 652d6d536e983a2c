package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Runner starts executions. It is safe for concurrent use.
type Runner struct {
	caps      Capabilities
	parent    string            // abs v2 parent dir, "" = no cgroups
	parentRel string            // parent relative to the v2 mount (as in /proc/PID/cgroup)
	v1Parents map[string]string // controller -> abs parent dir
	v1Rel     map[string]string // controller -> parent relative to its mount
	ownV1     map[string]string // controller -> our own abs v1 cgroup dir
	v1Roots   map[string]string // controller -> its hierarchy's root (where a spawning thread goes when ownV1 is gone)
	created   []string          // parent dirs we made (removed by Close)
	self      int
	selfSid   int
	selfPgid  int
	seq       atomic.Uint64

	mu   sync.Mutex
	live map[*Process]struct{}

	cleanup sync.WaitGroup // cgroup directories being removed
	reaper  orphanReaper   // one /proc scan for the executions ending together
	gate    refillGate     // the pools refill only when no execution is starting or young
	young   time.Duration  // youngRun, unless a test sets another

	netns  *netnsPool  // nil: no pool (Options.NoPool, or no network namespaces)
	ownNet int         // the daemon's network namespace (-1: cannot make or enter others)
	cgPool *cgroupPool // nil: no pool (Options.NoPool, or no cgroups)
	// launchers: pre-started termd-launch processes (nil: Options.NoPool,
	// or no cgroups or network namespaces).
	launchers *launcherPool
	nice      int // the daemon's nice value at start, which commands run with

	// LeafMove says whether termd moved itself into a leaf cgroup at start
	// (pure v2 with a delegated cgroup), for the daemon's log.
	LeafMove string
}

// removeLater removes an ended execution's cgroups in the background.
func (r *Runner) removeLater(cg *execCgroup) {
	r.cleanup.Add(1)
	go func() {
		defer r.cleanup.Done()
		cg.remove()
	}()
}

// New makes a Runner with default options; cgroupParent "" = auto.
func New(cgroupParent string) (*Runner, error) {
	return NewWithOptions(Options{CgroupParent: cgroupParent})
}

// NewWithOptions makes a Runner. It creates the cgroup parent directories it
// needs and enables the pids and memory controllers for them where v2 has them,
// removes the pooled cgroups a crashed termd left there, and (unless
// o.NoPool) starts filling its spawn pools.
func NewWithOptions(o Options) (*Runner, error) {
	r, err := newWithoutPools(o)
	if err != nil {
		return nil, err
	}
	if r.parent != "" {
		r.removeStalePools()
	}
	if !o.NoPool {
		r.startPools()
	}
	return r, nil
}

func newWithoutPools(o Options) (*Runner, error) {
	r := &Runner{
		caps:      Probe(),
		v1Parents: map[string]string{},
		v1Rel:     map[string]string{},
		ownV1:     map[string]string{},
		v1Roots:   map[string]string{},
		self:      os.Getpid(),
		live:      map[*Process]struct{}{},
		young:     youngRun,
	}
	r.selfSid, _ = unix.Getsid(0)
	r.selfPgid = unix.Getpgrp()
	r.ownNet = -1
	if r.caps.NetNS {
		if fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			r.ownNet = fd
		}
	}
	if o.NoCgroups || r.caps.CgroupV2 == "" {
		return r, nil
	}
	own := ownCgroup("")
	mount := r.caps.CgroupV2
	parent := o.CgroupParent
	if parent == "" {
		if !r.caps.Hybrid {
			r.LeafMove = moveToLeaf(mount, own.v2, r.self)
		}
		parent = filepath.Join(mount, own.v2, "termd")
	}
	parent = filepath.Clean(parent)
	rel, err := filepath.Rel(mount, parent)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("cgroup parent %s is not below the cgroup v2 mount %s", parent, mount)
	}
	if err := r.mkParent(mount, parent); err != nil {
		return nil, err
	}
	if o.CgroupParent == "" && unix.Access(parent, unix.W_OK|unix.X_OK) != nil {
		// Another user's termd made the shared parent (an unprivileged termd
		// beside a root one in the same cgroup): no cgroups rather than
		// failing every spawn.
		r.LeafMove = "cgroup parent " + parent + " belongs to another user: executions use the process-group fallback"
		return r, nil
	}
	r.parent = parent
	r.parentRel = "/" + rel
	if !o.NoV1 {
		for _, ctl := range []string{"pids", "memory"} {
			m := map[string]string{"pids": r.caps.V1Pids, "memory": r.caps.V1Memory}[ctl]
			if m == "" || own.v1[ctl] == "" {
				continue
			}
			ownDir := filepath.Join(m, own.v1[ctl])
			d := filepath.Join(ownDir, filepath.Base(parent))
			if err := r.mkdirTracked(d); err != nil {
				continue // v1 limits are optional
			}
			r.ownV1[ctl] = ownDir
			r.v1Roots[ctl] = m
			r.v1Parents[ctl] = d
			r.v1Rel[ctl] = filepath.Join(own.v1[ctl], filepath.Base(parent))
		}
	}
	return r, nil
}

// moveToLeaf makes limits possible on a pure cgroup v2 host where termd owns
// a delegated cgroup (systemd Delegate=yes): v2 will not hand controllers to
// children of a cgroup that has processes of its own, so when termd is the
// only process there and pids/memory are available, it moves itself into a
// "daemon" leaf and enables the controllers for its executions' parent. It
// reports what it did; on any failure it leaves things as they were.
func moveToLeaf(mount, own string, self int) string {
	if own == "/" || own == "" {
		return ""
	}
	dir := filepath.Join(mount, own)
	want := false
	for _, c := range readControllers(filepath.Join(dir, "cgroup.controllers")) {
		want = want || c == "pids" || c == "memory"
	}
	procs := readPids(filepath.Join(dir, "cgroup.procs"))
	if !want || len(procs) != 1 || procs[0] != self {
		return ""
	}
	leaf := filepath.Join(dir, "daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "not moved: " + err.Error()
	}
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), fmt.Sprint(self)); err != nil {
		_ = os.Remove(leaf)
		return "not moved: " + err.Error()
	}
	enableControllers(dir)
	return "moved termd into " + leaf + " so executions can have pids/memory limits"
}

// mkParent creates parent (and missing ancestors) and enables pids/memory in
// each level's subtree_control where available (best effort: a cgroup that has
// processes of its own cannot delegate controllers in v2).
func (r *Runner) mkParent(mount, parent string) error {
	rel, _ := filepath.Rel(mount, parent)
	cur := mount
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		enableControllers(cur)
		cur = filepath.Join(cur, part)
		if err := r.mkdirTracked(cur); err != nil {
			return fmt.Errorf("create cgroup parent: %w", err)
		}
	}
	enableControllers(cur)
	return nil
}

func enableControllers(dir string) {
	for _, c := range readControllers(filepath.Join(dir, "cgroup.controllers")) {
		if c == "pids" || c == "memory" {
			_ = writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c)
		}
	}
}

func (r *Runner) mkdirTracked(d string) error {
	err := os.Mkdir(d, 0o755)
	if err == nil {
		r.created = append(r.created, d)
		return nil
	}
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
}

// Close empties the spawn pools and removes the cgroup parent directories
// this Runner created, when empty.
func (r *Runner) Close() error {
	r.closePools()
	r.cleanup.Wait()
	var first error
	for i := len(r.created) - 1; i >= 0; i-- {
		if err := os.Remove(r.created[i]); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
	}
	r.created = nil
	return first
}

// Capabilities reports what this Runner found at New.
func (r *Runner) Capabilities() Capabilities { return r.caps }

// CgroupParent is the v2 directory holding per-execution cgroups ("" = none).
func (r *Runner) CgroupParent() string { return r.parent }

// ReserveCgroup is the v2 cgroup an execution with this id will use, so the
// daemon can record it in the intent before the process starts ("" without
// cgroups or for an empty id). With a cgroup pool it hands the id a pooled
// cgroup, which Start with that Spec.ID then uses; otherwise (or when the
// pool is empty) Start makes <parent>/x-<id>.
func (r *Runner) ReserveCgroup(id string) string {
	if r.parent == "" || id == "" {
		return ""
	}
	if r.cgPool != nil {
		if cg := r.cgPool.reserve(id); cg != nil {
			return cg.v2
		}
	}
	return filepath.Join(r.parent, cgroupName(id))
}

// Reserve is ReserveCgroup for spec.ID, except that a spec a pre-started
// launcher can serve is handed one now (Start with that Spec.ID then uses
// it), and the cgroup returned is that launcher's.
func (r *Runner) Reserve(spec Spec) string {
	if r.parent == "" || spec.ID == "" {
		return ""
	}
	if pl := r.launchers.reserve(spec.ID, spec); pl != nil {
		return pl.cg.v2
	}
	return r.ReserveCgroup(spec.ID)
}

func (r *Runner) register(p *Process) {
	r.mu.Lock()
	r.live[p] = struct{}{}
	r.mu.Unlock()
}

func (r *Runner) unregister(p *Process) {
	r.mu.Lock()
	delete(r.live, p)
	r.mu.Unlock()
}

func (r *Runner) liveProcesses() []*Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Process, 0, len(r.live))
	for p := range r.live {
		out = append(out, p)
	}
	return out
}
