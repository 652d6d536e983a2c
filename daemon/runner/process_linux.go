package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/cgroup"
	"github.com/termd/termd/daemon/runner/pool"
	"github.com/termd/termd/daemon/runner/proctree"
	"github.com/termd/termd/daemon/sandbox/launcher"
)

// Process is one running (or finished) execution.
type Process struct {
	r     *Runner
	spec  Spec
	id    string // Spec.ID, or a made-up one
	name  string // the cgroup's directory name
	proc  *os.Process
	pid   int
	pidfd int
	// mntns holds the mount namespace the launcher made for the command (-1:
	// none) until the result was delivered (or mntnsGrace after the result),
	// so that the command's exit does not wait for the namespace's teardown
	// (pool.AwaitConfined); letGo closes it.
	mntns atomic.Int32
	// launcherCtl is a released launcher's configuration socket (nil: none), from
	// which supervise takes the command's seccomp filter's listener
	// (pool.TakeFilter) into filter (-1: none), held as mntns is, so that
	// the command's exit does not free the filter's program.
	launcherCtl *os.File
	filter      atomic.Int32
	start       uint64 // start ticks of the main process
	cg          *cgroup.Cgroup
	netns       bool
	// ns is the network namespace the command was born in, kept to be
	// reused once the execution has ended (-1: none, or not reusable; see
	// pool.ReusableNetNS and releaseNetNS).
	ns int
	// prestarted: the main process is a pre-started launcher (launchpool_linux.go).
	prestarted bool
	out        [2]*capture
	pipes      [2]*os.File // read ends (a PTY execution: the master, and no stderr)
	tty        *terminal   // nil unless Spec.TTY

	startedAt time.Time
	// grown ends the execution's hold on the pools' refill (pool.Gate):
	// called once its result was delivered (Delivered), or by a timer after
	// pool.YoungRun.
	grown func()

	ctl sync.Mutex // serialises pause/resume/stop signalling
	// cgGone: the cgroup went back to the pool or away (releaseCgroup);
	// under ctl, after which nothing signals through it.
	cgGone bool

	mu       sync.Mutex
	reason   Status // set once by timeout or cancel
	stopping chan struct{}
	exited   bool
	paused   bool
	tracked  map[int]uint64 // fallback: pid -> start ticks seen in the tree

	done   chan struct{}
	result Result
}

// Start spawns spec. See the package doc for how spawn failures are reported.
func (r *Runner) Start(spec Spec) (*Process, error) {
	if err := validate(&spec); err != nil {
		return nil, err
	}
	id := spec.ID
	if id == "" {
		id = fmt.Sprintf("anon-%d-%d", r.self, r.seq.Add(1))
	}
	p := &Process{
		r:        r,
		spec:     spec,
		id:       id,
		name:     cgroupName(id),
		pidfd:    -1,
		ns:       -1,
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
		tracked:  map[int]uint64{},
	}
	ob := &budget{max: spec.OutputBudget, over: func() { p.beginStop(StatusOutputLimit) }}
	p.out[0] = newCapture(Stdout, spec.OutputCap, spec.NewHash(), spec.OnOutput, ob)
	p.out[1] = newCapture(Stderr, spec.OutputCap, spec.NewHash(), spec.OnOutput, ob)
	p.out[0].tail, p.out[1].tail = spec.KeepTail, spec.KeepTail
	p.mntns.Store(-1)
	p.filter.Store(-1)
	p.startedAt = time.Now()
	// Registered before spawning: while pid is 0 the execution claims every
	// orphan (see fallbackMembers), so another execution's cleanup cannot take
	// its freshly forked child for a leftover.
	r.register(p)
	r.holdRefill() // until its result is delivered or it has run for pool.YoungRun (pool.Gate)
	err := p.spawn()
	if err != nil {
		r.unregister(p)
		p.finishSpawnFailure(err)
		r.releaseRefill()
		return p, nil
	}
	var once sync.Once
	grown := time.AfterFunc(r.young, func() { once.Do(r.releaseRefill) })
	p.grown = func() {
		grown.Stop()
		once.Do(r.releaseRefill)
	}
	var readers sync.WaitGroup
	for i := range p.pipes {
		if p.pipes[i] == nil {
			p.out[i].finishEmpty() // a terminal's one stream is stdout
			continue
		}
		var src io.Reader = p.pipes[i]
		if p.tty != nil {
			src = activityReader{p.pipes[i], p.tty}
		}
		readers.Add(1)
		go func(c *capture, r io.Reader) {
			defer readers.Done()
			c.pump(r)
		}(p.out[i], src)
	}
	go p.supervise(&readers)
	return p, nil
}

// spawn starts the execution's main process: in a pre-started launcher when
// one can serve it, else forked here (in its cgroup and network namespace,
// through an inline launcher when the spec has one). Its steps: stdio, the
// cgroup, the network namespace, the fork, and (with a launcher) the
// configuration and the release.
func (p *Process) spawn() (err error) {
	r, spec := p.r, p.spec
	if pl := r.launchers.Claim(p.id, launcherWant(spec)); pl != nil {
		return p.spawnPooled(pl)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	sys := &syscall.SysProcAttr{Setpgid: true, Credential: spec.Credential, Pdeathsig: syscall.SIGKILL, PidFD: &p.pidfd}
	var writers [2]*os.File
	defer func() {
		for _, w := range writers {
			if w != nil {
				w.Close()
			}
		}
		if err != nil {
			for _, rd := range p.pipes {
				if rd != nil {
					rd.Close()
				}
			}
		}
	}()
	stdin, err := p.openStdio(sys, devnull, &writers)
	if err != nil {
		return err
	}
	if r.tree.Parent != "" {
		fd, err := p.openCgroup(sys)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
	}
	// A pooled network namespace is entered by the spawning thread just
	// before it forks (the child is born in it); without one the clone makes
	// a new namespace.
	nsfd := -1
	defer func() {
		if nsfd >= 0 {
			unix.Close(nsfd) // the child holds the namespace now; nothing else may
		}
	}()
	if err := p.chooseNetNS(sys, &nsfd); err != nil {
		return p.spawnFailed(err)
	}
	env := make([]string, len(spec.Env)) // never nil: nil would inherit os.Environ
	copy(env, spec.Env)
	attr := &os.ProcAttr{Dir: spec.Dir, Env: env, Files: []*os.File{stdin, writers[0], writers[1]}, Sys: sys}
	if spec.TTY != nil {
		attr.Files[2] = writers[0] // the terminal's slave: stderr too
	}
	path, argv, ln, err := p.inlineLauncher(attr)
	if err != nil {
		return p.spawnFailed(err)
	}
	if ln != nil {
		defer ln.closeChildEnds()
	}
	proc, err := p.fork(&nsfd, path, argv, attr)
	if err != nil {
		if ln != nil {
			ln.abandon()
		}
		return p.spawnFailed(err)
	}
	st := p.afterFork(proc, &nsfd)
	if ln != nil {
		if err := p.releaseInline(ln, proc, env); err != nil {
			return p.spawnFailed(err)
		}
	}
	p.setMain(proc, st)
	return nil
}

// setMain records the started main process and its start ticks.
func (p *Process) setMain(proc *os.Process, start uint64) {
	p.mu.Lock() // other executions read pid/start through ident()
	p.proc = proc
	p.pid = proc.Pid
	p.start = start
	p.mu.Unlock()
}

// openStdio makes the command's standard descriptors: stdin (Spec.Stdin or
// devnull) and the write ends of two pipes whose read ends are p.pipes, or a
// terminal's slave for all three (Spec.TTY). The caller closes writers.
func (p *Process) openStdio(sys *syscall.SysProcAttr, devnull *os.File, writers *[2]*os.File) (stdin *os.File, err error) {
	stdin = devnull
	if p.spec.Stdin != nil {
		stdin = p.spec.Stdin
	}
	if p.spec.TTY != nil {
		slave, err := p.openTerminal(sys)
		if err != nil {
			return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
		}
		writers[0], writers[1] = slave, nil
		return slave, nil
	}
	for i := range writers {
		rd, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		p.pipes[i], writers[i] = rd, w
		// A larger pipe means fewer wakeups for chatty commands; best effort.
		pool.GrowPipe(rd)
	}
	return stdin, nil
}

// openCgroup gives the execution its cgroup (a pooled one, or one made now)
// with its limits, and has the clone put the child in it (sys.CgroupFD: the
// descriptor returned, which the caller closes after the fork).
func (p *Process) openCgroup(sys *syscall.SysProcAttr) (int, error) {
	r, spec := p.r, p.spec
	cg, pooled := r.cgPool.Claim(p.id, limitsOf(spec))
	if pooled {
		if p.joinsV1() {
			cg.MarkJoined()
		}
		if err := r.tree.ApplyLimits(cg, limitsOf(spec)); err != nil {
			cg.Remove()
			return -1, err
		}
		p.name = filepath.Base(cg.Path())
	} else {
		var err error
		if cg, err = r.tree.Create(p.name, limitsOf(spec), p.joinsV1()); err != nil {
			return -1, err
		}
	}
	p.cg = cg
	fd, err := unix.Open(cg.Path(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		cg.Remove()
		p.cg = nil
		return -1, fmt.Errorf("open cgroup: %w", err)
	}
	sys.UseCgroupFD = true
	sys.CgroupFD = fd
	return fd, nil
}

// chooseNetNS decides the network namespace the command is born in: the
// workspace loopback it joins, a pooled empty one, or one the clone makes
// (*nsfd: the namespace the spawning thread enters before the fork; -1:
// none). An error is a spawn failure.
func (p *Process) chooseNetNS(sys *syscall.SysProcAttr, nsfd *int) error {
	r, spec := p.r, p.spec
	switch {
	case spec.JoinNetNS:
		if !r.caps.NetNS || r.ownNet < 0 {
			return errors.New("cannot join the workspace loopback: this daemon cannot enter network namespaces (it needs CAP_SYS_ADMIN)")
		}
		fd, err := unix.FcntlInt(uintptr(spec.NetNSFD), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("the workspace loopback's descriptor: %w", err)
		}
		*nsfd = fd
		p.netns = true
	case spec.NoNetwork:
		if r.caps.NetNS {
			if *nsfd = r.netns.Take(); *nsfd < 0 {
				sys.Cloneflags |= syscall.CLONE_NEWNET
			}
			p.netns = true
		} else if spec.RequireNoNetwork {
			return errors.New("network namespaces are not available and the spec requires no network")
		}
	}
	return nil
}

// inlineLauncher prepares the start of the spec's launcher: its
// descriptors join attr's, it gets no environment and no credentials (it
// switches after confining itself), and path and argv are the launcher's
// instead of the command's. Without Spec.Launch (nil ln) nothing can hold
// the command before it runs, so BeforeRelease is called here, before the
// spawn.
func (p *Process) inlineLauncher(attr *os.ProcAttr) (path string, argv []string, ln *launchPipes, err error) {
	spec := p.spec
	if spec.Launch == nil {
		if spec.BeforeRelease != nil {
			if err := spec.BeforeRelease(); err != nil {
				return "", nil, nil, err
			}
		}
		return spec.Path, spec.Argv, nil, nil
	}
	if ln, err = newLaunchPipes(spec.Launch); err != nil {
		return "", nil, nil, err
	}
	attr.Files = append(attr.Files, ln.files...)
	attr.Env = []string{}
	attr.Sys.Credential = nil // the launcher switches after confining itself
	if spec.Launch.NewMountNS {
		attr.Sys.Cloneflags |= syscall.CLONE_NEWNS
	}
	return spec.Launch.Path, []string{launcher.ArgvZero}, ln, nil
}

// fork starts path (forkIn), once more without a network namespace of its
// own when the kernel refused one and the spec does not require it.
func (p *Process) fork(nsfd *int, path string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	spec := p.spec
	cg, join := p.cg, p.cg != nil && p.joinsV1()
	if join {
		cg = nil // the thread forks it into its v2 cgroup only (CgroupFD)
	}
	forkIn := func() (*os.Process, error) {
		proc, err := p.r.forkIn(cg, nsfd, spec.JoinNetNS, path, argv, attr, p.done)
		if err == nil && join {
			if err = p.cg.JoinV1(proc.Pid); err != nil {
				_ = proc.Kill()
				_, _ = proc.Wait()
				return nil, err
			}
		}
		return proc, err
	}
	proc, err := forkIn()
	if err != nil && p.netns && !spec.RequireNoNetwork && !spec.JoinNetNS && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL)) {
		attr.Sys.Cloneflags &^= syscall.CLONE_NEWNET
		p.netns = false
		if *nsfd >= 0 {
			unix.Close(*nsfd)
			*nsfd = -1
		}
		proc, err = forkIn()
	}
	return proc, err
}

// joinsV1: the execution's main process is an inline launcher, which is
// moved into its v1 cgroups right after its fork (cgroup.Cgroup.JoinV1,
// one write a hierarchy) rather than forked by a thread that enters them
// and leaves them again (four writes, and a fifth for the pids limit the
// thread raised): it waits for its configuration before it does anything,
// as a pre-started one does.
func (p *Process) joinsV1() bool { return p.spec.Launch != nil }

// afterFork does what needs no running command before the release, while
// the intent is committed, not between the command's exec and its run: the
// final v1 pids.max (the spawning thread has left), keeping a reusable
// network namespace, and the main process's start time (set at fork,
// unchanged by exec), which it returns.
func (p *Process) afterFork(proc *os.Process, nsfd *int) (start uint64) {
	spec := p.spec
	if p.cg != nil {
		p.cg.Settle()
	}
	if p.netns && !spec.JoinNetNS && spec.Launch != nil && pool.ReusableNetNS(launchConfig(spec, nil)) {
		p.keepNetNS(nsfd, proc.Pid)
	}
	if pi, ok := proctree.Read(proc.Pid); ok {
		start = pi.Start
	}
	return start
}

// releaseInline configures the inline launcher proc, which waits on its
// configuration socket (nothing has run yet): it confines itself while
// BeforeRelease waits (for the intent), and execs only on release. On an
// error the launcher is killed and reaped: nothing of the command ran.
func (p *Process) releaseInline(ln *launchPipes, proc *os.Process, env []string) error {
	err := ln.send(p.spec, env)
	if err == nil {
		var fd int
		fd, err = ln.confined(proc.Pid) // while the intent is committed
		p.mntns.Store(int32(fd))
	}
	if err == nil && p.spec.BeforeRelease != nil {
		err = p.spec.BeforeRelease()
	}
	if err == nil {
		if err = ln.release(); err == nil {
			p.launcherCtl = ln.ctl // supervise takes the filter from it
		}
	}
	if err != nil {
		p.letGo()
		ln.abandon() // the end of file: a launcher still waiting exits without running anything
		_ = proc.Kill()
		_, _ = proc.Wait()
	}
	return err
}

// forkIn starts path on a locked thread that enters cg's v1 cgroups (the v2
// one is attr.Sys's CgroupFD) and the network namespace *nsfd just before
// the fork, so the child is born in them, and leaves them right after. When
// *nsfd cannot be entered it is closed, set to -1, and the clone makes a
// namespace instead. A thread that cannot leave must not fork anything
// else, so it ends, but only once hold is closed (the child's end: Pdeathsig
// fires when the forking thread ends); with hold nil the child is killed
// and the start fails instead.
//
// join: *nsfd is a namespace the command must be born in (a workspace
// loopback): failing to enter it fails the start instead.
func (r *Runner) forkIn(cg *cgroup.Cgroup, nsfd *int, join bool, path string, argv []string, attr *os.ProcAttr, hold <-chan struct{}) (*os.Process, error) {
	sys := attr.Sys
	var proc *os.Process
	var serr error
	lockedThread(func() <-chan struct{} {
		leave := func() error { return nil }
		if cg != nil {
			l, err := r.tree.EnterV1(cg)
			if err != nil {
				serr = err
				return nil
			}
			leave = l
		}
		leaveNS := func() error { return nil }
		if *nsfd >= 0 {
			if err := unix.Setns(*nsfd, unix.CLONE_NEWNET); err != nil {
				unix.Close(*nsfd)
				*nsfd = -1
				if join {
					serr = fmt.Errorf("entering the workspace loopback: %w", err)
					if leave() != nil {
						return ended
					}
					return nil
				}
				// Not entered: make a namespace at clone instead.
				sys.Cloneflags |= syscall.CLONE_NEWNET
			} else {
				leaveNS = r.leaveNetNS
			}
		}
		proc, serr = os.StartProcess(path, argv, attr)
		errNS, errV1 := leaveNS(), leave()
		if errNS == nil && errV1 == nil {
			return nil
		}
		// The thread cannot leave the execution's v1 cgroups or its
		// network namespace, so it must not be reused to fork anything
		// else; it ends (lockedThread), but only after the execution:
		// Pdeathsig would SIGKILL the child the moment its forking
		// thread exits.
		if errV1 != nil {
			cg.MarkStuck()
		}
		if serr != nil {
			return ended // nothing started: end the thread now
		}
		if hold == nil {
			_ = proc.Kill()
			_, _ = proc.Wait()
			proc, serr = nil, fmt.Errorf("the spawning thread could not leave the new process's cgroup or namespace: %w", errors.Join(errNS, errV1))
			return ended
		}
		return hold
	})
	return proc, serr
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

// ended is a closed channel: "hold nothing, end the thread now".
var ended = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (p *Process) spawnFailed(err error) error {
	if p.pidfd >= 0 { // forked, then failed (the release): supervise, which closes it, never runs
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
	if p.ns >= 0 {
		unix.Close(p.ns)
		p.ns = -1
	}
	if p.cg != nil {
		p.cg.KillAll(time.Second)
		p.cg.Remove()
	}
	return err
}

func (p *Process) finishSpawnFailure(err error) {
	now := time.Now()
	p.result = Result{
		Status:       StatusFailed,
		ExitCode:     -1,
		StartedAt:    p.startedAt,
		FinishedAt:   now,
		Duration:     now.Sub(p.startedAt),
		Stdout:       p.out[0].finishEmpty(),
		Stderr:       p.out[1].finishEmpty(),
		Err:          fmt.Errorf("spawn %s: %w", p.spec.Path, err),
		NetNSApplied: false,
	}
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	close(p.done)
}

// mntnsGrace is how long after its result an execution whose delivery
// nobody reports keeps holding its mount namespace and seccomp filter.
const mntnsGrace = time.Second

// letGo ends the execution's hold on its command's mount namespace and
// seccomp filter: the kernel tears the namespace down in this thread now,
// and frees the filter, after the result instead of in the command's exit.
func (p *Process) letGo() {
	for _, h := range []*atomic.Int32{&p.mntns, &p.filter} {
		if fd := h.Swap(-1); fd >= 0 {
			unix.Close(int(fd))
		}
	}
}

// Delivered says the execution's result has been delivered (the daemon has
// committed its receipt): the execution stops holding the pools' refill back
// (pool.Gate), if it still did, and lets its command's mount namespace and
// seccomp filter go. Without it the refill's hold ends after pool.YoungRun,
// the namespace's and the filter's mntnsGrace after the result.
func (p *Process) Delivered() {
	if p.grown != nil {
		p.grown()
	}
	p.letGo()
}

// Pid is the main process id (0 after a spawn failure).
func (p *Process) Pid() int { return p.pid }

// Identity is (pid, start time in clock ticks since boot): stable across pid
// reuse; give it to KillLeftoversStrict.
func (p *Process) Identity() (int, uint64) { return p.pid, p.start }

// CgroupPath is the execution's v2 cgroup ("" when none).
func (p *Process) CgroupPath() string {
	if p.cg == nil {
		return ""
	}
	return p.cg.Path()
}

// Done is closed when the result is final.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the execution has ended and everything it started is gone.
func (p *Process) Wait() Result {
	<-p.done
	return p.result
}

// ReadOutput returns kept bytes of stream s from offset (at most limit bytes;
// limit < 0 = all), the total bytes written so far, and whether the stream has
// ended. Bytes past the cap are counted and hashed but not kept.
func (p *Process) ReadOutput(s Stream, offset int64, limit int) ([]byte, int64, bool) {
	switch s {
	case Stdout:
		return p.out[0].read(offset, limit)
	case Stderr:
		return p.out[1].read(offset, limit)
	}
	return nil, 0, true
}

// Paused reports whether the execution is currently frozen.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Pause freezes every process of the execution (cgroup.freeze, or SIGSTOP to
// the whole tree without it). The timeout keeps counting.
func (p *Process) Pause() error {
	p.ctl.Lock()
	defer p.ctl.Unlock()
	p.mu.Lock()
	exited, stopping, paused := p.exited, p.reason != "", p.paused
	p.mu.Unlock()
	switch {
	case exited:
		return ErrFinished
	case stopping:
		return ErrStopping
	case paused:
		return nil
	}
	if p.cg != nil && p.cg.CanFreeze() {
		if err := p.cg.SetFrozen(true); err != nil {
			return err
		}
	} else {
		p.signalTree(syscall.SIGSTOP, true)
	}
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	return nil
}

// Resume thaws a paused execution.
func (p *Process) Resume() error {
	p.ctl.Lock()
	defer p.ctl.Unlock()
	p.mu.Lock()
	exited, paused := p.exited, p.paused
	p.mu.Unlock()
	if exited {
		return ErrFinished
	}
	if !paused {
		return nil
	}
	return p.thaw()
}

// thaw requires p.ctl.
func (p *Process) thaw() error {
	var err error
	if p.cg != nil && p.cg.CanFreeze() {
		err = p.cg.SetFrozen(false)
	} else {
		p.signalTree(syscall.SIGCONT, false)
	}
	if err == nil {
		p.mu.Lock()
		p.paused = false
		p.mu.Unlock()
	}
	return err
}

// Cancel ends the execution: SIGTERM to everything, the grace period, then
// SIGKILL. A paused execution is thawed after the SIGTERM so it can act on it.
// Cancel does not wait; use Wait. Cancelling a finished execution is a no-op.
func (p *Process) Cancel() error {
	p.beginStop(StatusCancelled)
	return nil
}

// beginStop records why we are ending the execution (first reason wins; none
// once the main process has exited) and sends SIGTERM to everything.
func (p *Process) beginStop(reason Status) bool {
	p.mu.Lock()
	if p.exited || p.reason != "" {
		p.mu.Unlock()
		return false
	}
	p.reason = reason
	close(p.stopping)
	p.mu.Unlock()

	p.ctl.Lock()
	defer p.ctl.Unlock()
	if p.cgGone {
		return true // the exit came first and its cleanup is over
	}
	p.signalTree(syscall.SIGTERM, false)
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if paused {
		_ = p.thaw()
	}
	return true
}

// supervise waits for the main process, enforces timeout and grace, then
// cleans up and publishes the result.
func (p *Process) supervise(readers *sync.WaitGroup) {
	if p.launcherCtl != nil {
		p.filter.Store(int32(pool.TakeFilter(p.launcherCtl)))
	}
	exited := make(chan struct{})
	go func() {
		p.waitExitNoReap()
		close(exited)
	}()
	p.watch(exited)

	// The main process has exited but is not reaped yet (WNOWAIT), so its pid
	// and process group id cannot be reused while we clean up.
	exitedAt := time.Now()
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	leftovers := p.killTree()
	state, werr := p.proc.Wait()
	p.reapOrphans() // after our own zombie is gone, so the peek can say "none"
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
	p.drainOutput(readers)
	var limits []string
	cgPath := ""
	p.releaseNetNS() // before the cgroup goes: its emptiness is what lets the namespace serve again
	if p.cg != nil {
		limits = p.cg.Applied()
		cgPath = p.cg.Path()
		p.releaseCgroup()
	}
	p.r.unregister(p)

	now := time.Now()
	res := Result{
		ExitCode:     -1,
		StartedAt:    p.startedAt,
		ExitedAt:     exitedAt,
		FinishedAt:   now,
		Duration:     now.Sub(p.startedAt),
		Stdout:       p.out[0].result(),
		Stderr:       p.out[1].result(),
		CgroupUsed:   p.cg != nil,
		CgroupPath:   cgPath,
		NetNSApplied: p.netns,
		Limits:       limits,
		Leftovers:    leftovers,
		IdleTimedOut: p.tty != nil && p.tty.idle.Load(),
	}
	p.mu.Lock()
	reason := p.reason
	p.paused = false
	p.mu.Unlock()
	setStatus(&res, reason, state, werr)
	p.result = res
	if p.mntns.Load() >= 0 || p.filter.Load() >= 0 {
		time.AfterFunc(mntnsGrace, p.letGo)
	}
	close(p.done)
}

// watch returns once the main process has exited (exited is closed),
// meanwhile enforcing the timeout, the terminal's idle limit and the grace
// after a stop, and (without a cgroup) tracking the process tree.
func (p *Process) watch(exited <-chan struct{}) {
	var tracking <-chan time.Time
	if p.cg == nil {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		tracking = t.C
		p.track(proctree.Snapshot())
	}
	timeout := time.NewTimer(p.spec.Timeout)
	defer timeout.Stop()
	var idle <-chan struct{}
	if p.spec.TTY != nil {
		idleStop := make(chan struct{})
		defer close(idleStop)
		idle = p.tty.idleWatch(p.spec.TTY.Idle, idleStop)
	}
	var grace <-chan time.Time
	stopping := p.stopping
	for {
		select {
		case <-exited:
			return
		case <-tracking:
			p.track(proctree.Snapshot())
		case <-timeout.C:
			select {
			case <-exited: // exited first; not a timeout
				return
			default:
			}
			p.beginStop(StatusTimedOut)
		case <-idle:
			idle = nil
			if p.beginStop(StatusTimedOut) {
				p.tty.idle.Store(true)
			}
		case <-stopping:
			stopping = nil
			gt := time.NewTimer(p.spec.Grace)
			defer gt.Stop()
			grace = gt.C
		case <-grace:
			grace = nil
			p.killTree()
		}
	}
}

// drainOutput waits for the output readers and closes the pipes.
// Everything that could hold the pipes is dead; EOF follows at once unless
// a process escaped containment. Do not hang on that.
func (p *Process) drainOutput(readers *sync.WaitGroup) {
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(5 * time.Second):
		for _, f := range p.pipes {
			f.Close()
		}
		<-readersDone
	}
	for _, f := range p.pipes {
		f.Close()
	}
}

// setStatus sets res's status, exit code and signal from the main process's
// wait status and the reason we ended it ("" = we did not).
func setStatus(res *Result, reason Status, state *os.ProcessState, werr error) {
	if werr != nil {
		res.Status = StatusFailed
		res.Err = fmt.Errorf("wait: %w", werr)
		return
	}
	ws := state.Sys().(syscall.WaitStatus)
	if ws.Exited() {
		res.ExitCode = ws.ExitStatus()
	} else if ws.Signaled() {
		res.Signal = unix.SignalName(ws.Signal())
	}
	switch {
	case reason != "":
		res.Status = reason
	case ws.Exited() && ws.ExitStatus() == 0:
		res.Status = StatusSucceeded
	case ws.Exited():
		res.Status = StatusFailed
	default:
		res.Status = StatusKilled
	}
}

// waitExitNoReap blocks until the main process has exited, leaving it a zombie.
func (p *Process) waitExitNoReap() {
	if p.pidfd >= 0 {
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PIDFD, p.pidfd, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err == nil {
				return
			}
			if err != unix.EINTR {
				break
			}
		}
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// signalTree sends sig to every process of the execution. With stopAll it
// repeats until no new process shows up (used for SIGSTOP without a freezer:
// a stopped process cannot fork, so the set converges).
func (p *Process) signalTree(sig syscall.Signal, stopAll bool) {
	if p.cg != nil {
		for i := 0; i < 50; i++ {
			sent := 0
			seen := map[int]bool{}
			for _, pid := range p.cg.Procs() {
				if !seen[pid] {
					seen[pid] = true
					_ = unix.Kill(pid, sig)
					sent++
				}
			}
			if !stopAll || sent == 0 || !p.hasUnstopped(seen) {
				return
			}
		}
		return
	}
	_ = unix.Kill(-p.pid, sig)
	for i := 0; i < 50; i++ {
		members := p.fallbackMembers(proctree.Snapshot(), false)
		seen := map[int]bool{}
		for pid := range members {
			seen[pid] = true
			_ = unix.Kill(pid, sig)
		}
		if !stopAll || !p.hasUnstopped(seen) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// hasUnstopped reports whether any process in set is still running (not in
// state T/t/Z), i.e. another SIGSTOP round is needed.
func (p *Process) hasUnstopped(set map[int]bool) bool {
	for pid := range set {
		if pi, ok := proctree.Read(pid); ok && pi.State != 'T' && pi.State != 't' && pi.State != 'Z' && pi.State != 'X' {
			return true
		}
	}
	if p.cg == nil {
		for pid := range p.fallbackMembers(proctree.Snapshot(), false) {
			if !set[pid] {
				return true
			}
		}
	}
	return false
}

// killTree SIGKILLs everything the execution started and waits until it is
// gone. It returns how many processes other than the main one it found alive.
func (p *Process) killTree() int {
	found := map[int]bool{}
	if p.cg != nil {
		// The common case: the main process was alone and has exited (a
		// zombie is no longer a member), so the cgroups are empty and nothing
		// can enter them any more; skip listing and cgroup.kill.
		if !p.cg.Populated() {
			return 0
		}
		for _, pid := range p.cg.Procs() {
			if pi, ok := proctree.Read(pid); ok {
				p.noteTracked(pi)
			}
			if pid != p.pid {
				found[pid] = true
			}
		}
		p.cg.KillAll(10 * time.Second)
		return len(found)
	}
	_ = unix.Kill(-p.pid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		snap := proctree.Snapshot()
		p.track(snap)
		alive := 0
		for pid, pi := range p.fallbackMembers(snap, true) {
			if pid == p.pid {
				continue
			}
			p.noteTracked(pi) // so reapOrphans knows it
			if pi.State == 'Z' {
				continue
			}
			alive++
			found[pid] = true
			_ = unix.Kill(pid, syscall.SIGKILL)
		}
		if alive == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return len(found)
}

func (p *Process) noteTracked(pi proctree.Info) {
	p.mu.Lock()
	p.tracked[pi.Pid] = pi.Start
	p.mu.Unlock()
}

// track records the current process tree of the execution (fallback mode), so
// that its members stay attributable after their parents exit.
func (p *Process) track(snap map[int]proctree.Info) {
	m := p.fallbackMembers(snap, false)
	p.mu.Lock()
	for pid, pi := range m {
		p.tracked[pid] = pi.Start
	}
	p.mu.Unlock()
}

// fallbackMembers finds the execution's processes without cgroups: the main
// process, its process group, everything seen in its tree before, orphans
// re-parented to us (subreaper) that must be ours, and all their descendants.
// atEnd also claims orphans no other live execution can claim.
func (p *Process) fallbackMembers(snap map[int]proctree.Info, atEnd bool) map[int]proctree.Info {
	self := p.r.self
	roots := map[int]bool{}
	if pi, ok := snap[p.pid]; ok && pi.Start == p.start {
		roots[p.pid] = true
	}
	p.mu.Lock()
	for pid, st := range p.tracked {
		if pi, ok := snap[pid]; ok && pi.Start == st {
			roots[pid] = true
		}
	}
	p.mu.Unlock()
	var others []*Process
	if atEnd {
		for _, o := range p.r.liveProcesses() {
			if o != p {
				others = append(others, o)
			}
		}
	}
	for pid, pi := range snap {
		if pid == self {
			continue
		}
		if pi.Pgid == p.pid {
			roots[pid] = true
			continue
		}
		if atEnd && pi.PPid == self && pi.Start >= p.start && p.r.unclaimedOrphan(pi) {
			claimed := false
			for _, o := range others {
				if _, ost := o.ident(); ost <= pi.Start && !o.isEnded() {
					claimed = true
					break
				}
			}
			if !claimed {
				roots[pid] = true
			}
		}
	}
	m := proctree.Descendants(snap, roots)
	delete(m, self)
	return m
}

func (p *Process) isEnded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// unclaimedOrphan: a direct child of ours that no execution started directly
// and that does not look like a plain os/exec child of some other part of the
// daemon (those share our session and process group).
func (r *Runner) unclaimedOrphan(pi proctree.Info) bool {
	if pi.Sid == r.selfSid && pi.Pgid == r.selfPgid {
		return false
	}
	for _, o := range r.liveProcesses() {
		if opid, ost := o.ident(); opid == pi.Pid && ost == pi.Start {
			return false
		}
	}
	return true
}

// reapOrphans reaps zombies re-parented to us that belonged to this execution,
// one pid at a time, never "any child" (see EnableSubreaper); the /proc scan
// it takes is shared with the executions ending at the same time (reapFor).
func (p *Process) reapOrphans() {
	if !hasZombieChild() {
		return // the common case, without a /proc scan
	}
	if p.cg != nil && p.cg.NoTasksCharged() {
		return // the zombie is another execution's: none of ours is left
	}
	p.r.reapFor(p)
}

func (r *Runner) isMain(pid int, start uint64) bool {
	for _, o := range r.liveProcesses() {
		if opid, ost := o.ident(); opid == pid && ost == start {
			return true
		}
	}
	return false
}

// IsExecutionProcess reports whether pid belongs to one of this Runner's
// executions: it sits in one of our execution cgroups, or its ppid chain (or
// process group) leads to a live execution's process. The daemon uses it to
// refuse socket connections from commands it started.
func (r *Runner) IsExecutionProcess(pid int) bool {
	if pid <= 0 || pid == r.self {
		return false
	}
	if r.tree.Holds(pid) {
		return true
	}
	live := r.liveProcesses()
	if len(live) == 0 {
		return false
	}
	cur := pid
	for i := 0; i < 256; i++ {
		pi, ok := proctree.Read(cur)
		if !ok {
			return false
		}
		for _, o := range live {
			opid, ost := o.ident()
			if (opid == pi.Pid && ost == pi.Start) || (pi.Pgid == opid && opid != 0) {
				return true
			}
			o.mu.Lock()
			st, seen := o.tracked[pi.Pid]
			o.mu.Unlock()
			if seen && st == pi.Start {
				return true
			}
		}
		if pi.PPid <= 1 || pi.PPid == r.self {
			return false
		}
		cur = pi.PPid
	}
	return false
}

// KillLeftoversStrict kills whatever remains of an execution from a previous
// daemon run (an intent without a receipt): every process in cgroupPath (then
// the cgroup is removed), and the process group and descendants of pid when
// pid still leads its group and still has the start time startTicks (clock
// ticks since boot, from Process.Identity). With startTicks 0 (not known)
// pid is not touched: after pid reuse it may lead an unrelated group.
func KillLeftoversStrict(pid int, startTicks uint64, cgroupPath string) error {
	var errs []error
	if cgroupPath != "" {
		if err := cgroup.KillPath(cgroupPath); err != nil {
			errs = append(errs, err)
		}
	}
	if pid > 1 && pid != os.Getpid() {
		if pi, ok := proctree.Read(pid); ok && startTicks != 0 && pi.Start == startTicks && pi.Pgid == pid {
			for i := 0; i < 100; i++ {
				snap := proctree.Snapshot()
				roots := map[int]bool{pid: true}
				for q, qi := range snap {
					if qi.Pgid == pid {
						roots[q] = true
					}
				}
				m := proctree.Descendants(snap, roots)
				delete(m, os.Getpid())
				alive := 0
				for q, qi := range m {
					if qi.State != 'Z' {
						alive++
						_ = unix.Kill(q, syscall.SIGKILL)
					}
				}
				if alive == 0 {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
	return errors.Join(errs...)
}

// hasZombieChild peeks (WNOWAIT: reaps nothing, steals no status) whether any
// child of ours is waitable.
func hasZombieChild() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo != 0
}

// ident is (pid, start ticks) for use by other goroutines; (0, 0) while spawning.
func (p *Process) ident() (int, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid, p.start
}
