package pool

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/cgroup"
	"github.com/termd/termd/daemon/runner/proctree"
	"github.com/termd/termd/daemon/sandbox/launcher"
)

// Launcher is one termd-launch started ahead of its execution, waiting on
// its configuration socket (launcher.Pooled). The execution that takes it
// owns everything in it.
type Launcher struct {
	Proc   *os.Process
	PidFD  int
	NS     int    // the network namespace it was born in (-1: none kept)
	Start  uint64 // start ticks of Proc, read when it was started
	Cgroup *cgroup.Cgroup
	Ctl    *os.File    // our end of the configuration socket
	Report *os.File    // the report pipe's read end
	Out    [2]*os.File // stdout and stderr read ends
}

// discard kills a launcher that will not be used, reaps it and removes its
// cgroup. Nothing ran in it: it never got its 'g'.
func (pl *Launcher) discard(lp *Launchers) {
	pl.Ctl.Close() // end of file: a launcher still waiting exits by itself
	_ = unix.PidfdSendSignal(pl.PidFD, unix.SIGKILL, nil, 0)
	_, _ = pl.Proc.Wait()
	unix.Close(pl.PidFD)
	pl.Report.Close()
	pl.Out[0].Close()
	pl.Out[1].Close()
	pl.Cgroup.KillAll(time.Second)
	if pl.NS >= 0 {
		lp.NetNS.Recycle(pl.NS) // nothing but the launcher was in it
		pl.NS = -1
	}
	lp.RemoveLater(pl.Cgroup)
}

// alive: the launcher has not exited (it still waits for its execution).
func (pl *Launcher) alive() bool {
	fds := []unix.PollFd{{Fd: int32(pl.PidFD), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 0
}

// Launchers keeps pre-started launchers of one termd-launch binary (the
// first sandboxed spawn names it), filled like the other spawn pools: at
// start and when no execution is starting or young (Gate), never on
// the spawn's own path.
type Launchers struct {
	LauncherDeps
	path  atomic.Pointer[string]
	ready chan *Launcher
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	err   atomic.Pointer[error] // why the last start failed (tests print it)

	mu       sync.Mutex
	reserved map[string]*Launcher
	closed   bool
	// served, inline: spawns that fit (Want) and got a pre-started
	// launcher, or found none ready and started theirs inline; started:
	// launchers the filler started (Status).
	served, inline, started atomic.Uint64
}

// LauncherDeps is what a Launchers pool uses of the runner.
type LauncherDeps struct {
	Cgroups *Cgroups    // where each launcher's cgroup comes from
	NetNS   *NetNS      // where its network namespace comes from (nil: made at clone)
	Quiet   func() bool // may fill now (Gate.Quiet)
	// Fork starts the launcher (os.StartProcess on a locked thread that
	// enters the namespace *nsfd first; see runner's forkIn).
	Fork func(nsfd *int, path string, argv []string, attr *os.ProcAttr) (*os.Process, error)
	// RemoveLater removes a discarded launcher's cgroup in the background.
	RemoveLater func(*cgroup.Cgroup)
}

// NewLaunchers starts a pool of pre-started launchers; it starts filling
// once the first sandboxed spawn has named the launcher binary (Reserve,
// Claim).
func NewLaunchers(d LauncherDeps) *Launchers {
	lp := &Launchers{
		LauncherDeps: d,
		ready:        make(chan *Launcher, Size),
		kick:         make(chan struct{}, 1),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
		reserved:     map[string]*Launcher{},
	}
	go lp.fill()
	return lp
}

func (lp *Launchers) fill() {
	defer close(lp.done)
	for {
		if path := lp.path.Load(); path != nil {
			for len(lp.ready) < cap(lp.ready) && lp.Quiet() { // only fill sends: never blocks
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
				lp.started.Add(1)
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

// Refill asks the filler to top the pool up.
func (lp *Launchers) Refill() {
	if lp != nil {
		select {
		case lp.kick <- struct{}{}:
		default:
		}
	}
}

// start starts one launcher in a pooled cgroup (recycled or made now) and a
// fresh network namespace.
func (lp *Launchers) start(path string) (pl *Launcher, err error) {
	cg, err := lp.Cgroups.ForLauncher()
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
	pl = &Launcher{Cgroup: cg, PidFD: -1, NS: -1}
	files, err := pl.openEnds(&ours, &theirs)
	if err != nil {
		return nil, err
	}
	cgfd, err := unix.Open(cg.Path(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	defer unix.Close(cgfd)
	sys := &syscall.SysProcAttr{
		Setpgid:     true,
		Pdeathsig:   syscall.SIGKILL,
		PidFD:       &pl.PidFD,
		UseCgroupFD: true,
		CgroupFD:    cgfd,
	}
	nsfd := lp.NetNS.Take()
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
		Files: files,
		Sys:   sys,
	}
	// Not at a lowered priority, unlike the namespace filler: the fork
	// holds one of the Go runtime's Ps until the launcher has exec'd, and a
	// niced child on a busy machine holds it longer (three A/B runs at a
	// load of 8-20 on 2 cores: the same pair time with or without nice 10,
	// the receipt stage slower with it each time). The launcher still
	// takes the daemon's priority when it gets its execution.
	// Forked into its v2 cgroup (CgroupFD) and then moved into the v1 ones
	// (JoinV1): it waits for its execution before it forks anything.
	proc, err := lp.Fork(&nsfd, path, []string{launcher.ArgvZero, launcher.Pooled}, attr)
	if err != nil {
		return nil, fmt.Errorf("start a pooled launcher: %w", err)
	}
	if err := cg.JoinV1(proc.Pid); err != nil {
		_ = proc.Kill()
		_, _ = proc.Wait()
		unix.Close(pl.PidFD)
		return nil, fmt.Errorf("start a pooled launcher: %w", err)
	}
	pl.Proc = proc
	// Kept, whether pooled or made at clone: its execution may hand it
	// back to the pool (ReusableNetNS).
	if nsfd >= 0 {
		pl.NS, nsfd = nsfd, -1
	} else if fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", proc.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		pl.NS = fd
	}
	if pi, ok := proctree.Read(proc.Pid); ok {
		pl.Start = pi.Start // here, not on the execution's path
	}
	return pl, nil
}

// GrowPipe enlarges the buffer of pipe rd, an output's read end: a larger
// pipe means fewer wake-ups for chatty commands (best effort). It goes
// through the raw descriptor, since File.Fd would put rd in blocking mode:
// each read would then hold a thread and its P in the kernel while the
// command runs, and Go's sysmon, finding a P in a system call, keeps
// waking every 20 µs, preempting the command (20-25 times during a `pwd`).
func GrowPipe(rd *os.File) {
	if raw, err := rd.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
}

// openEnds makes the launcher's descriptors: its stdout, stderr and report
// pipes and its configuration socket (our ends go into pl and ours, the
// launcher's into theirs, which the caller closes once it has them) and
// returns what the launcher gets as descriptors 0 to 4.
func (pl *Launcher) openEnds(ours, theirs *[]*os.File) ([]*os.File, error) {
	var child [3]*os.File // stdout, stderr, report
	for i, dst := range []**os.File{&pl.Out[0], &pl.Out[1], &pl.Report} {
		rd, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		*dst, child[i] = rd, w
		*ours, *theirs = append(*ours, rd), append(*theirs, w)
	}
	for _, rd := range pl.Out {
		GrowPipe(rd)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	pl.Ctl = os.NewFile(uintptr(pair[0]), "launcher-config")
	sock := os.NewFile(uintptr(pair[1]), "launcher-config-child")
	*ours, *theirs = append(*ours, pl.Ctl), append(*theirs, sock)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	*theirs = append(*theirs, devnull)
	return []*os.File{devnull, child[0], child[1], sock, child[2]}, nil
}

// Want is what of an execution decides whether a pre-started launcher can
// serve it.
type Want struct {
	Launch    *launcher.Launch // nil: no sandbox, no launcher
	NoNetwork bool             // in a namespace of its own
	JoinNetNS bool             // in a workspace loopback, joined by the launcher
	Terminal  bool             // on a pseudo-terminal
	Stdin     bool             // with a standard input of its own
}

// fits says whether w can run in a pre-started launcher. It names the
// pool's launcher binary at the first sandboxed spawn (which itself starts
// its launcher inline).
func (lp *Launchers) fits(w Want) bool {
	l := w.Launch
	if lp == nil || l == nil {
		return false
	}
	files := len(l.Files)
	if w.JoinNetNS {
		files++ // the workspace loopback, joined by the launcher
	}
	if w.Terminal || w.Stdin || !(w.NoNetwork || w.JoinNetNS) || len(l.Prefix) > 0 || l.Config.UserNS || files > launcher.MaxPassedFDs {
		return false
	}
	if path := lp.path.Load(); path != nil {
		return *path == l.Path
	}
	// Named only: the fill starts when this execution stops holding the
	// refill back (Gate), like every refill. Kicked here, between
	// Runner.Reserve and Start, it raced the very execution that named it
	// (which then took a launcher started meanwhile).
	p := l.Path
	lp.path.CompareAndSwap(nil, &p)
	return false
}

// take returns a ready launcher that is still waiting, or nil.
func (lp *Launchers) take() *Launcher {
	for {
		select {
		case pl := <-lp.ready:
			if pl.alive() {
				return pl
			}
			pl.discard(lp) // killed from outside while it waited
		default:
			return nil
		}
	}
}

// Reserve hands execution id a launcher now, so the intent can name its
// cgroup; nil when w does not fit or none is ready.
func (lp *Launchers) Reserve(id string, w Want) *Launcher {
	if !lp.fits(w) || id == "" {
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

// Claim is the launcher for an execution starting now: its reservation or a
// ready one; nil: start one inline.
func (lp *Launchers) Claim(id string, w Want) *Launcher {
	if lp == nil {
		return nil
	}
	lp.mu.Lock()
	pl, ok := lp.reserved[id]
	delete(lp.reserved, id)
	closed := lp.closed
	lp.mu.Unlock()
	if !ok {
		if closed || !lp.fits(w) {
			return nil
		}
		pl = lp.take()
	} else if !pl.alive() {
		pl.discard(lp)
		pl = nil
	}
	if pl == nil {
		lp.inline.Add(1)
	} else {
		lp.served.Add(1)
	}
	return pl
}

// Close stops the filler and discards every launcher the pool holds.
func (lp *Launchers) Close() {
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
	lp.reserved = map[string]*Launcher{}
	lp.mu.Unlock()
	close(lp.stop)
	<-lp.done
	for _, pl := range reserved {
		pl.discard(lp)
	}
	for {
		select {
		case pl := <-lp.ready:
			pl.discard(lp)
		default:
			return
		}
	}
}

// Status says what the pool holds and how many spawns it served (tests
// and /debug/stages print it).
func (lp *Launchers) Status() string {
	if lp == nil {
		return "launchers: started at spawn"
	}
	s := fmt.Sprintf("launchers: %d ready, %d started; spawns served %d, started inline %d (none ready)",
		len(lp.ready), lp.started.Load(), lp.served.Load(), lp.inline.Load())
	if err := lp.err.Load(); err != nil {
		s += fmt.Sprintf(" (last start failed: %v)", *err)
	}
	return s
}
