package runner

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/pool"
)

// The spawn pools (package pool) as the runner uses them: started with the
// Runner, kicked when no execution is starting or young any more (the
// refill gate), emptied at Close, and the network namespace an execution
// was born in handed back for reuse.

// holdRefill counts one execution starting (pool.Gate).
func (r *Runner) holdRefill() { r.gate.Hold() }

// releaseRefill ends one holdRefill; the last one kicks the fillers.
func (r *Runner) releaseRefill() {
	if r.gate.Release() {
		r.refillPools()
	}
}

// keepNetNS keeps the namespace the execution's command was born in for
// reuse (releaseNetNS): *nsfd, the pooled one it was forked in (taken from
// the caller, which then closes nothing), or the one its clone made.
func (p *Process) keepNetNS(nsfd *int, pid int) {
	if *nsfd >= 0 {
		p.ns, *nsfd = *nsfd, -1
		return
	}
	if fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		p.ns = fd
	}
}

// releaseNetNS lets the ended execution's network namespace go: back to
// the pool when no process of the execution is left (its v2 cgroup is
// empty, and without a capability none can have left it), else closed.
func (p *Process) releaseNetNS() {
	fd := p.ns
	if fd < 0 {
		return
	}
	p.ns = -1
	if p.cg == nil || !p.cg.EmptyV2() {
		unix.Close(fd)
		return
	}
	p.r.netns.Recycle(fd)
}

// releaseCgroup lets the ended execution's cgroup go, in the background
// (the result need not wait): back to the pool when it can serve another
// execution (pool.Cgroups.Recycle), else removed (everything in it is dead;
// the kernel may take a few milliseconds to let the directory go). Never
// while a Pause, Resume or stop still works on it (they hold ctl; Pause and
// Resume see the exit, a stop sees cgGone): a signal through it would reach
// the next execution's processes.
func (p *Process) releaseCgroup() {
	p.ctl.Lock()
	p.cgGone = true
	p.ctl.Unlock()
	r, cg := p.r, p.cg
	r.cleanup.Add(1)
	go func() {
		defer r.cleanup.Done()
		if r.noReuse || !r.cgPool.Recycle(cg) {
			cg.Remove()
		}
	}()
}

// leaveNetNS moves the calling locked thread back into the daemon's network
// namespace (forkIn entered one so that the child it forked was born there).
func (r *Runner) leaveNetNS() error { return unix.Setns(r.ownNet, unix.CLONE_NEWNET) }

// removeStalePools kills what is left in the pooled cgroups of a termd that
// is no longer running (it crashed: an execution that was running has its
// intent, and becomes outcome_unknown) and removes them.
func (r *Runner) removeStalePools() {
	r.tree.RemoveStale(pool.Stale)
}

// startPools starts the spawn pools this Runner can use.
func (r *Runner) startPools() {
	// The calling thread's priority is the daemon's: the pools' filler
	// threads lower theirs, and one of them may be the main thread, so the
	// process's (main thread's) value is not reliable once a pool runs.
	prio, prioErr := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if r.caps.NetNS {
		if np, err := pool.NewNetNS(r.gate.Quiet); err == nil {
			r.netns = np
		}
	}
	if r.tree.Parent != "" {
		r.cgPool = pool.NewCgroups(r.tree, r.self, r.gate.Quiet)
		if r.caps.NetNS && prioErr == nil {
			r.nice = 20 - prio // the raw call answers 20-nice
			r.launchers = pool.NewLaunchers(pool.LauncherDeps{
				Cgroups:     r.cgPool,
				NetNS:       r.netns,
				Quiet:       r.gate.Quiet,
				Fork:        r.forkLauncher,
				RemoveLater: r.removeLater,
			})
		}
	}
}

// forkLauncher starts a pre-started launcher (pool.LauncherDeps.Fork): in
// the network namespace *nsfd, not held (a thread that cannot leave it
// fails the start).
func (r *Runner) forkLauncher(nsfd *int, path string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	return r.forkIn(nil, nsfd, false, path, argv, attr, nil)
}

// refillPools kicks the fillers (releaseRefill, when no execution is
// starting or young any more).
func (r *Runner) refillPools() {
	r.netns.Refill()
	r.cgPool.Refill()
	r.launchers.Refill()
}

func (r *Runner) closePools() {
	r.launchers.Close()
	r.netns.Close()
	r.cgPool.Close()
}

// PoolStatus says what the spawn pools hold and served (/debug/stages).
func (r *Runner) PoolStatus() string {
	return strings.Join([]string{r.netns.Status(), r.cgPool.Status(), r.launchers.Status()}, "; ")
}
