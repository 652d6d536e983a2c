package runner

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/cgroup"
	"github.com/termd/termd/daemon/runner/pool"
)

// Runner starts executions. It is safe for concurrent use.
type Runner struct {
	caps     Capabilities
	tree     *cgroup.Tree // the cgroup parents (Parent "" = no cgroups)
	self     int
	selfSid  int
	selfPgid int
	seq      atomic.Uint64

	mu   sync.Mutex
	live map[*Process]struct{}

	cleanup sync.WaitGroup // cgroup directories being removed
	reaper  orphanReaper   // one /proc scan for the executions ending together
	gate    pool.Gate      // the pools refill only when no execution is starting or young
	young   time.Duration  // pool.YoungRun, unless a test sets another

	netns  *pool.NetNS   // nil: no pool (Options.NoPool, or no network namespaces)
	ownNet int           // the daemon's network namespace (-1: cannot make or enter others)
	cgPool *pool.Cgroups // nil: no pool (Options.NoPool, or no cgroups)
	// launchers: pre-started termd-launch processes (nil: Options.NoPool,
	// or no cgroups or network namespaces).
	launchers *pool.Launchers
	nice      int  // the daemon's nice value at start, which commands run with
	noReuse   bool // Options.NoCgroupReuse

	// LeafMove says whether termd moved itself into a leaf cgroup at start
	// (pure v2 with a delegated cgroup), for the daemon's log.
	LeafMove string
}

// removeLater removes an ended execution's cgroups in the background.
func (r *Runner) removeLater(cg *cgroup.Cgroup) {
	r.cleanup.Add(1)
	go func() {
		defer r.cleanup.Done()
		cg.Remove()
	}()
}

// New makes a Runner with default options; cgroupParent "" = auto.
func New(cgroupParent string) (*Runner, error) {
	return NewWithOptions(Options{CgroupParent: cgroupParent})
}

// NewWithOptions makes a Runner. It creates the cgroup parent directories it
// needs and enables the pids and memory controllers for them where v2 has them
// (cgroup.NewTree),
// removes the pooled cgroups a crashed termd left there, and (unless
// o.NoPool) starts filling its spawn pools.
func NewWithOptions(o Options) (*Runner, error) {
	r, err := newWithoutPools(o)
	if err != nil {
		return nil, err
	}
	if r.tree.Parent != "" {
		r.removeStalePools()
	}
	if !o.NoPool {
		r.startPools()
	}
	return r, nil
}

func newWithoutPools(o Options) (*Runner, error) {
	r := &Runner{
		caps:    Probe(),
		self:    os.Getpid(),
		live:    map[*Process]struct{}{},
		young:   pool.YoungRun,
		noReuse: o.NoCgroupReuse,
	}
	r.selfSid, _ = unix.Getsid(0)
	r.selfPgid = unix.Getpgrp()
	r.ownNet = -1
	if r.caps.NetNS {
		if fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			r.ownNet = fd
		}
	}
	tree, leafMove, err := cgroup.NewTree(&r.caps.Host, cgroup.TreeOptions{Parent: o.CgroupParent, NoCgroups: o.NoCgroups, NoV1: o.NoV1}, r.self)
	if err != nil {
		return nil, err
	}
	r.tree, r.LeafMove = tree, leafMove
	return r, nil
}

// Close empties the spawn pools and removes the cgroup parent directories
// this Runner created, when empty.
func (r *Runner) Close() error {
	r.closePools()
	r.cleanup.Wait()
	return r.tree.Close()
}

// Capabilities reports what this Runner found at New.
func (r *Runner) Capabilities() Capabilities { return r.caps }

// CgroupParent is the v2 directory holding per-execution cgroups ("" = none).
func (r *Runner) CgroupParent() string { return r.tree.Parent }

// ReserveCgroup is the v2 cgroup an execution with this id will use, so the
// daemon can record it in the intent before the process starts ("" without
// cgroups or for an empty id). With a cgroup pool it hands the id a pooled
// cgroup, which Start with that Spec.ID then uses; otherwise (or when the
// pool is empty) Start makes <parent>/x-<id>.
func (r *Runner) ReserveCgroup(id string) string {
	if r.tree.Parent == "" || id == "" {
		return ""
	}
	if r.cgPool != nil {
		if cg := r.cgPool.Reserve(id); cg != nil {
			return cg.Path()
		}
	}
	return filepath.Join(r.tree.Parent, cgroupName(id))
}

// Reserve is ReserveCgroup for spec.ID, except that a spec a pre-started
// launcher can serve is handed one now (Start with that Spec.ID then uses
// it), and the cgroup returned is that launcher's.
func (r *Runner) Reserve(spec Spec) string {
	if r.tree.Parent == "" || spec.ID == "" {
		return ""
	}
	if pl := r.launchers.Reserve(spec.ID, launcherWant(spec)); pl != nil {
		return pl.Cgroup.Path()
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

// limitsOf is the cgroup limits of spec.
func limitsOf(spec Spec) cgroup.Limits {
	return cgroup.Limits{Pids: spec.PidsMax, Memory: spec.MemoryMax}
}

// launcherWant is what of spec decides whether a pre-started launcher can
// serve it.
func launcherWant(spec Spec) pool.Want {
	return pool.Want{Launch: spec.Launch, NoNetwork: spec.NoNetwork, JoinNetNS: spec.JoinNetNS, Terminal: spec.TTY != nil, Stdin: spec.Stdin != nil}
}
