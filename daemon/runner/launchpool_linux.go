package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/cgroup"
	"github.com/termd/termd/daemon/runner/proctree"
	"github.com/termd/termd/daemon/sandbox/launcher"
)

// Pre-started launchers. Forking and exec'ing termd-launch is most of what a
// sandboxed spawn costs beyond the command's own exec, so the runner keeps a
// few launchers started ahead, each already in its own pooled cgroup and
// network namespace, in its own process group, with its stdout and stderr
// pipes, waiting on a unix socket (launcher.Pooled). An execution that takes
// one sends it the plan's configuration and descriptors (the Landlock
// ruleset) at once, so it confines itself while the intent is committed, and
// sends the byte that lets it exec the command only after BeforeRelease. A
// launcher is used once: it becomes the execution's main process. Plans a
// pooled launcher cannot serve (network allowed, a terminal, a user
// namespace, another launcher binary) start their launcher inline.

// pooledLauncher is one termd-launch started ahead of its execution.
type pooledLauncher struct {
	proc  *os.Process
	pidfd int
	ns    int    // the network namespace it was born in (-1: none kept)
	start uint64 // start ticks of proc, read when it was started
	cg    *cgroup.Cgroup
	ctl   *os.File    // our end of the configuration socket
	rep   *os.File    // the report pipe's read end
	out   [2]*os.File // stdout and stderr read ends
}

// discard kills a launcher that will not be used, reaps it and removes its
// cgroup. Nothing ran in it: it never got its 'g'.
func (pl *pooledLauncher) discard(r *Runner) {
	pl.ctl.Close() // end of file: a launcher still waiting exits by itself
	_ = unix.PidfdSendSignal(pl.pidfd, unix.SIGKILL, nil, 0)
	_, _ = pl.proc.Wait()
	unix.Close(pl.pidfd)
	pl.rep.Close()
	pl.out[0].Close()
	pl.out[1].Close()
	pl.cg.KillAll(time.Second)
	if pl.ns >= 0 {
		r.netns.recycle(pl.ns) // nothing but the launcher was in it
		pl.ns = -1
	}
	r.removeLater(pl.cg)
}

// alive: the launcher has not exited (it still waits for its execution).
func (pl *pooledLauncher) alive() bool {
	fds := []unix.PollFd{{Fd: int32(pl.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 0
}

// send gives the launcher its configuration and the plan's descriptors (see
// launcher.Pooled); it confines itself on receiving them.
func (pl *pooledLauncher) send(cfg []byte, files []*os.File) error {
	return sendLaunchConfig(pl.ctl, cfg, files)
}

// confined waits until the launcher has confined itself; see awaitConfined.
func (pl *pooledLauncher) confined() (mntns int, err error) {
	return awaitConfined(pl.ctl, pl.rep, pl.proc.Pid)
}

// release lets the launcher exec the command and waits until it has (the
// report pipe closes at exec) or has refused (a message says why).
func (pl *pooledLauncher) release() error {
	return releaseLauncher(pl.ctl, pl.rep)
}

// launcherPool keeps pre-started launchers of one termd-launch binary (the
// first sandboxed spawn names it), filled like the other spawn pools: at
// start and when no execution is starting or young (refillGate), never on
// the spawn's own path.
type launcherPool struct {
	r     *Runner
	path  atomic.Pointer[string]
	ready chan *pooledLauncher
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	err   atomic.Pointer[error] // why the last start failed (tests print it)

	mu       sync.Mutex
	reserved map[string]*pooledLauncher
	closed   bool
}

func newLauncherPool(r *Runner) *launcherPool {
	lp := &launcherPool{
		r:        r,
		ready:    make(chan *pooledLauncher, poolSize),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		reserved: map[string]*pooledLauncher{},
	}
	go lp.fill()
	return lp
}

func (lp *launcherPool) fill() {
	defer close(lp.done)
	for {
		if path := lp.path.Load(); path != nil {
			for len(lp.ready) < cap(lp.ready) && lp.r.refillQuiet() { // only fill sends: never blocks
				select {
				case <-lp.stop:
					return
				default:
				}
				pl, err := lp.start(*path)
				if err != nil {
					lp.err.Store(&err)
					break // spawns start their launchers inline meanwhile
				}
				lp.ready <- pl
			}
		}
		select {
		case <-lp.kick:
		case <-lp.stop:
			return
		}
	}
}

func (lp *launcherPool) refill() {
	if lp != nil {
		select {
		case lp.kick <- struct{}{}:
		default:
		}
	}
}

// start starts one launcher in a fresh pooled cgroup and network namespace.
func (lp *launcherPool) start(path string) (pl *pooledLauncher, err error) {
	r := lp.r
	cg, err := r.cgPool.make(true)
	if err != nil {
		return nil, err
	}
	var ours, theirs []*os.File // theirs: the launcher's ends, closed once it has them
	defer func() {
		for _, f := range theirs {
			f.Close()
		}
		if err != nil {
			for _, f := range ours {
				f.Close()
			}
			cg.KillAll(time.Second)
			cg.Remove()
		}
	}()
	pl = &pooledLauncher{cg: cg, pidfd: -1, ns: -1}
	var child [3]*os.File // stdout, stderr, report
	for i, dst := range []**os.File{&pl.out[0], &pl.out[1], &pl.rep} {
		rd, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		*dst, child[i] = rd, w
		ours, theirs = append(ours, rd), append(theirs, w)
	}
	for _, rd := range pl.out {
		// A larger pipe means fewer wakeups for chatty commands; best effort.
		_, _ = unix.FcntlInt(rd.Fd(), unix.F_SETPIPE_SZ, 1<<20)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	pl.ctl = os.NewFile(uintptr(pair[0]), "launcher-config")
	sock := os.NewFile(uintptr(pair[1]), "launcher-config-child")
	ours, theirs = append(ours, pl.ctl), append(theirs, sock)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	theirs = append(theirs, devnull)
	cgfd, err := unix.Open(cg.Path(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	defer unix.Close(cgfd)
	sys := &syscall.SysProcAttr{
		Setpgid:     true,
		Pdeathsig:   syscall.SIGKILL,
		PidFD:       &pl.pidfd,
		UseCgroupFD: true,
		CgroupFD:    cgfd,
	}
	nsfd := r.netns.take()
	defer func() {
		if nsfd >= 0 {
			unix.Close(nsfd)
		}
	}()
	if nsfd < 0 {
		sys.Cloneflags |= syscall.CLONE_NEWNET
	}
	attr := &os.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []*os.File{devnull, child[0], child[1], sock, child[2]},
		Sys:   sys,
	}
	// Not at a lowered priority, unlike the namespace filler: the fork
	// holds one of the Go runtime's Ps until the launcher has exec'd, and a
	// niced child on a busy machine holds it longer (three A/B runs at a
	// load of 8-20 on 2 cores: the same pair time with or without nice 10,
	// the receipt stage slower with it each time). The launcher still
	// takes the daemon's priority when it gets its execution.
	// Forked into its v2 cgroup (CgroupFD) and then moved into the v1 ones
	// (joinV1): it waits for its execution before it forks anything.
	proc, err := r.forkIn(nil, &nsfd, false, path, []string{launcher.ArgvZero, launcher.Pooled}, attr, nil)
	if err != nil {
		return nil, fmt.Errorf("start a pooled launcher: %w", err)
	}
	if err := cg.JoinV1(proc.Pid); err != nil {
		_ = proc.Kill()
		_, _ = proc.Wait()
		unix.Close(pl.pidfd)
		return nil, fmt.Errorf("start a pooled launcher: %w", err)
	}
	pl.proc = proc
	// Kept, whether pooled or made at clone: its execution may hand it
	// back to the pool (reusableNetNS).
	if nsfd >= 0 {
		pl.ns, nsfd = nsfd, -1
	} else if fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", proc.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		pl.ns = fd
	}
	if pi, ok := proctree.Read(proc.Pid); ok {
		pl.start = pi.Start // here, not on the execution's path
	}
	return pl, nil
}

// fits says whether spec can run in a pre-started launcher. It names the
// pool's launcher binary at the first sandboxed spawn (which itself starts
// its launcher inline).
func (lp *launcherPool) fits(spec Spec) bool {
	l := spec.Launch
	if lp == nil || l == nil {
		return false
	}
	files := len(l.Files)
	if spec.JoinNetNS {
		files++ // the workspace loopback, joined by the launcher
	}
	if spec.TTY != nil || spec.Stdin != nil || !(spec.NoNetwork || spec.JoinNetNS) || len(l.Prefix) > 0 || l.Config.UserNS || files > launcher.MaxPassedFDs {
		return false
	}
	if path := lp.path.Load(); path != nil {
		return *path == l.Path
	}
	// Named only: the fill starts when this execution stops holding the
	// refill back (refillGate), like every refill. Kicked here, between
	// Runner.Reserve and Start, it raced the very execution that named it
	// (which then took a launcher started meanwhile).
	p := l.Path
	lp.path.CompareAndSwap(nil, &p)
	return false
}

// take returns a ready launcher that is still waiting, or nil.
func (lp *launcherPool) take() *pooledLauncher {
	for {
		select {
		case pl := <-lp.ready:
			if pl.alive() {
				return pl
			}
			pl.discard(lp.r) // killed from outside while it waited
		default:
			return nil
		}
	}
}

// reserve hands execution id a launcher now, so the intent can name its
// cgroup; nil when spec does not fit or none is ready.
func (lp *launcherPool) reserve(id string, spec Spec) *pooledLauncher {
	if !lp.fits(spec) || id == "" {
		return nil
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if pl, ok := lp.reserved[id]; ok || lp.closed {
		return pl
	}
	pl := lp.take()
	if pl != nil {
		lp.reserved[id] = pl
	}
	return pl
}

// claim is the launcher for an execution starting now: its reservation or a
// ready one; nil: start one inline.
func (lp *launcherPool) claim(id string, spec Spec) *pooledLauncher {
	if lp == nil {
		return nil
	}
	lp.mu.Lock()
	pl, ok := lp.reserved[id]
	delete(lp.reserved, id)
	closed := lp.closed
	lp.mu.Unlock()
	if ok {
		if pl.alive() {
			return pl
		}
		pl.discard(lp.r)
		return nil
	}
	if closed || !lp.fits(spec) {
		return nil
	}
	return lp.take()
}

func (lp *launcherPool) close() {
	if lp == nil {
		return
	}
	lp.mu.Lock()
	if lp.closed {
		lp.mu.Unlock()
		return
	}
	lp.closed = true
	reserved := lp.reserved
	lp.reserved = map[string]*pooledLauncher{}
	lp.mu.Unlock()
	close(lp.stop)
	<-lp.done
	for _, pl := range reserved {
		pl.discard(lp.r)
	}
	for {
		select {
		case pl := <-lp.ready:
			pl.discard(lp.r)
		default:
			return
		}
	}
}

// spawnPooled starts the execution in a pre-started launcher: its cgroup
// gets spec's limits, the launcher its configuration (it confines itself
// meanwhile), and only after BeforeRelease the go-ahead to exec.
func (p *Process) spawnPooled(pl *pooledLauncher) (err error) {
	r, spec := p.r, p.spec
	p.prestarted = true
	p.cg, p.name, p.netns = pl.cg, filepath.Base(pl.cg.Path()), true
	p.pidfd = pl.pidfd
	p.pipes = pl.out
	p.ns, pl.ns = pl.ns, -1 // spawnFailed closes it
	fail := func(err error) error {
		p.closeMountNS()
		pl.ctl.Close()
		_ = pl.proc.Kill()
		_, _ = pl.proc.Wait()
		pl.rep.Close()
		for i, f := range p.pipes {
			f.Close()
			p.pipes[i] = nil
		}
		unix.Close(p.pidfd)
		p.pidfd = -1
		return p.spawnFailed(err)
	}
	if err := r.tree.ApplyLimits(pl.cg, limitsOf(spec)); err != nil {
		spec.Launch.Close()
		return fail(err)
	}
	if err := pl.cg.JoinV1(pl.proc.Pid); err != nil { // a v1 cgroup its limits added
		spec.Launch.Close()
		return fail(err)
	}
	env := make([]string, len(spec.Env))
	copy(env, spec.Env)
	c := launchConfig(spec, env)
	c.Cwd, c.MountNS = spec.Dir, spec.Launch.NewMountNS
	if c.Cwd == "" { // Spec.Dir "" is the daemon's directory, as inline
		if c.Cwd, err = os.Getwd(); err != nil {
			spec.Launch.Close()
			return fail(fmt.Errorf("the daemon's working directory: %w", err))
		}
	}
	c.SetNice, c.Nice = true, r.nice
	c.SayConfined = c.MountNS
	// A joined launcher leaves its pooled namespace before anything runs.
	if !spec.JoinNetNS && !reusableNetNS(c) && p.ns >= 0 {
		unix.Close(p.ns)
		p.ns = -1
	}
	files := spec.Launch.Files
	if spec.JoinNetNS {
		// Born in a pooled empty namespace, it joins the workspace
		// loopback before anything else (launcher.Config.NetNSFD).
		fd, derr := unix.FcntlInt(uintptr(spec.NetNSFD), unix.F_DUPFD_CLOEXEC, 0)
		if derr != nil {
			spec.Launch.Close()
			return fail(fmt.Errorf("the workspace loopback's descriptor: %w", derr))
		}
		ns := os.NewFile(uintptr(fd), "workspace-netns")
		defer ns.Close()
		c.NetNSFD = launcher.FirstFD + len(files)
		files = append(files[:len(files):len(files)], ns)
	}
	err = pl.send(c.Encode(), files)
	spec.Launch.Close() // the launcher holds its copies now
	if err != nil {
		return fail(err)
	}
	// It confines itself while the intent is committed.
	if c.SayConfined {
		mntns, err := pl.confined()
		if err != nil {
			return fail(err) // its report: nothing ran
		}
		p.mntns.Store(int32(mntns))
	}
	if spec.BeforeRelease != nil {
		if err := spec.BeforeRelease(); err != nil {
			return fail(err) // the launcher never gets its 'g': nothing ran
		}
	}
	if err := pl.release(); err != nil {
		return fail(err)
	}
	p.setMain(pl.proc, pl.start)
	return nil
}

// Prestarted says whether the execution ran in a pre-started launcher.
func (p *Process) Prestarted() bool { return p.prestarted }
