package runner

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/cgroup"
	"github.com/termd/termd/daemon/runner/proctree"
	"github.com/termd/termd/daemon/sandbox/launcher"
)

// Spawn pools. Making a network namespace and a cgroup directory is most of
// what a spawn costs beyond fork and exec, so both are made ahead, in the
// background, and handed out one per execution, made inline when a pool is
// empty. A cgroup is removed after its execution (as without a pool): its
// usage counters (cpu.stat, memory.stat) cannot be reset and the next
// execution could read them. A network namespace is reused when nothing of
// its execution can be left in it (netnsPool.recycle): see reusableNetNS for
// which executions qualify and pristineNetNS for what is checked.

// poolSize is how many of each a pool keeps ready.
const poolSize = 4

// poolNice lowers the filler threads' priority: refilling must not compete
// with the spawn it refills for.
const poolNice = 10

// youngRun is how long a running execution holds the refill back at most
// (see refillGate): the start of a short command is what a refill would
// slow, and a long one must not starve the pools.
// Runner.youngRun overrides it in tests.
const youngRun = 20 * time.Millisecond

// refillGate holds the pools' refill back while an execution is starting or
// young: from its spawn until its result was delivered (Process.Delivered:
// the daemon committed its receipt) or it has run for youngRun. A refill
// forks a launcher and makes a cgroup and a namespace; on a busy machine,
// done while the command ran it competed with the very command it refilled
// for (the run stage of /bin/true grew by about what the pools saved at
// spawn), and done at the command's exit, with its receipt. The fillers
// check quiet before each item they make and stop when it is not; the
// execution that makes the gate quiet again kicks them. A pool that runs
// empty meanwhile means spawns make their own, as without a pool.
type refillGate struct {
	mu   sync.Mutex
	busy int
}

// holdRefill counts one execution starting.
func (r *Runner) holdRefill() {
	r.gate.mu.Lock()
	r.gate.busy++
	r.gate.mu.Unlock()
}

// releaseRefill ends one holdRefill; the last one kicks the fillers.
func (r *Runner) releaseRefill() {
	r.gate.mu.Lock()
	r.gate.busy--
	quiet := r.gate.busy == 0
	r.gate.mu.Unlock()
	if quiet {
		r.refillPools()
	}
}

// refillQuiet: no execution is starting or young, the fillers may work.
func (r *Runner) refillQuiet() bool {
	r.gate.mu.Lock()
	defer r.gate.mu.Unlock()
	return r.gate.busy == 0
}

// netnsPool keeps network namespaces, as descriptors: fresh ones made by one
// dedicated thread, and ones whose execution ended, checked by that thread
// (recycle).
type netnsPool struct {
	own   int           // the daemon's own network namespace
	ready chan int      // empty namespaces: fresh, or reused and checked
	back  chan int      // namespaces whose execution ended, to check (recycle)
	quiet func() bool   // may fill now (Runner.refillQuiet)
	kick  chan struct{} // the gate became quiet: refill
	stop  chan struct{}
	done  chan struct{}
	err   atomic.Pointer[error] // why the filler stopped early
	once  sync.Once

	mu     sync.Mutex // recycle against close
	closed bool
	// made, reused, dropped: namespaces made, handed back after a check,
	// and let go (a check failed, or the pool was full).
	made, reused, dropped atomic.Uint64
}

// netnsKept bounds the namespaces the pool holds (ready plus waiting for
// their check): fresh ones are made up to poolSize, reused ones kept up to
// this many; beyond it a namespace whose execution ended is let go.
const netnsKept = 4 * poolSize

func newNetnsPool(quiet func() bool) (*netnsPool, error) {
	own, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the daemon's network namespace: %w", err)
	}
	np := &netnsPool{own: own, ready: make(chan int, netnsKept), back: make(chan int, netnsKept), quiet: quiet, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go np.fill()
	return np, nil
}

// fill runs on a thread of its own for its whole life: the thread moves
// between namespaces, so it stays locked and ends with the goroutine instead
// of going back to the runtime. It never starts a process, so its end cannot
// take a child with it (Pdeathsig). It fills the pool at start and whenever
// no execution is starting or young (refillGate), not when a namespace is
// taken: then it would compete with the spawn, the intent's commit and the
// command for the CPU.
//
// Namespaces handed back (recycle) are checked at once, gate or not: a
// check is a few reads, where making a namespace is a quarter of a
// millisecond of CPU here and as much again for the kernel to tear the
// old one down.
func (np *netnsPool) fill() {
	defer close(np.done)
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), poolNice)
	for {
		for len(np.ready) < poolSize && len(np.back) == 0 && np.quiet() {
			select {
			case <-np.stop:
				return
			default:
			}
			fd, err := np.make()
			if err != nil {
				np.err.Store(&err)
				return // executions make their namespaces at clone, as without a pool
			}
			np.made.Add(1)
			np.put(fd)
		}
		select {
		case <-np.kick:
		case fd := <-np.back:
			if err := np.check(fd); err != nil {
				np.err.Store(&err)
				return // the thread is in another namespace: it ends with the goroutine
			}
		case <-np.stop:
			return
		}
	}
}

// put adds an empty namespace to the ready ones, or lets it go when the
// pool is full.
func (np *netnsPool) put(fd int) bool {
	select {
	case np.ready <- fd:
		return true
	default:
		unix.Close(fd)
		np.dropped.Add(1)
		return false
	}
}

// recycle hands back the namespace of an execution that ended (see
// reusableNetNS): the filler checks it (pristineNetNS) and makes it ready
// again, or lets it go. The pool owns fd from here.
func (np *netnsPool) recycle(fd int) {
	if np == nil {
		unix.Close(fd)
		return
	}
	np.mu.Lock()
	defer np.mu.Unlock()
	if np.closed || np.err.Load() != nil {
		unix.Close(fd)
		return
	}
	select {
	case np.back <- fd:
	default:
		unix.Close(fd)
		np.dropped.Add(1)
	}
}

// check enters the namespace fd on the filler's thread, keeps it when
// pristineNetNS says it is as a fresh one, and returns to the daemon's
// namespace; an error means the thread could not return.
func (np *netnsPool) check(fd int) error {
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		unix.Close(fd)
		np.dropped.Add(1)
		return nil
	}
	clean := pristineNetNS() == nil
	if err := unix.Setns(np.own, unix.CLONE_NEWNET); err != nil {
		unix.Close(fd)
		return fmt.Errorf("return to the daemon's network namespace: %w", err)
	}
	if !clean {
		unix.Close(fd)
		np.dropped.Add(1)
		return nil
	}
	if np.put(fd) {
		np.reused.Add(1)
	}
	return nil
}

// pristineNetNS says, on a thread inside a network namespace, whether it is
// as a fresh one is: no socket at all (not even a TCP socket in TIME_WAIT),
// one device, the loopback, down and without an address. nil: pristine.
func pristineNetNS() error {
	st, err := os.ReadFile("/proc/thread-self/net/sockstat")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(st), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "sockets:" && f[2] != "0":
			return fmt.Errorf("%s sockets in use", f[2])
		case len(f) >= 7 && f[0] == "TCP:" && f[5] == "tw" && f[6] != "0": // (orphan counts the host's)
			return fmt.Errorf("TCP sockets left in TIME_WAIT: %s", f[6])
		}
	}
	dev, err := os.ReadFile("/proc/thread-self/net/dev")
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(dev)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.TrimSpace(lines[2]), "lo:") {
		return fmt.Errorf("devices other than the loopback: %q", lines[2:])
	}
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	if ifr.Uint16()&unix.IFF_UP != 0 {
		return errors.New("the loopback is up")
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFADDR, ifr); !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("the loopback has an address (%v)", err)
	}
	return nil
}

// refill asks the filler to top the pool up.
func (np *netnsPool) refill() {
	if np != nil {
		select {
		case np.kick <- struct{}{}:
		default:
		}
	}
}

// make creates a namespace on the calling thread, keeps a descriptor to it
// and returns the thread to the daemon's namespace. Like a namespace made at
// clone time, it has only a loopback device, which is down.
func (np *netnsPool) make() (int, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return -1, fmt.Errorf("unshare network namespace: %w", err)
	}
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if serr := unix.Setns(np.own, unix.CLONE_NEWNET); serr != nil {
		if err == nil {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("return to the daemon's network namespace: %w", serr)
	}
	if err != nil {
		return -1, fmt.Errorf("open the new network namespace: %w", err)
	}
	return fd, nil
}

// take returns a fresh namespace's descriptor (the caller closes it), or -1
// when none is ready.
func (np *netnsPool) take() int {
	if np == nil {
		return -1
	}
	select {
	case fd := <-np.ready:
		return fd
	default:
		return -1
	}
}

// reusableNetNS says whether the network namespace of an execution whose
// launcher has configuration c may serve another execution once every
// process of it is gone. What outlives a namespace's processes is what a
// capability changes (devices, addresses, routes, firewall rules) or the
// host's uid 0 may write without one (its net sysctls), and sockets passed
// to a process outside. So the launcher must empty the capability bounding
// set with no_new_privs (DropCaps, NoNewPrivs: no exec gains one back) and
// the command must not be the host's uid 0 (it switches to another uid, or
// it is root mapped to an unprivileged uid by a user namespace); and
// pristineNetNS checks, at every reuse, that no socket is left.
func reusableNetNS(c launcher.Config) bool {
	return c.DropCaps && c.NoNewPrivs && !c.UserNS && (c.UserNSFD > 0 || (c.SetCred && c.UID != 0))
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
	p.r.netns.recycle(fd)
}

// leaveNetNS moves the calling locked thread back into the daemon's network
// namespace (forkIn entered one so that the child it forked was born there).
func (r *Runner) leaveNetNS() error { return unix.Setns(r.ownNet, unix.CLONE_NEWNET) }

func (np *netnsPool) close() {
	if np == nil {
		return
	}
	np.once.Do(func() {
		np.mu.Lock()
		np.closed = true
		np.mu.Unlock()
		close(np.stop)
		<-np.done
		for {
			select {
			case fd := <-np.ready:
				unix.Close(fd)
			case fd := <-np.back:
				unix.Close(fd)
			default:
				unix.Close(np.own)
				return
			}
		}
	})
}

// cgroupPool keeps per-execution cgroups made ahead: the v2 directory and,
// on hybrid hosts, the v1 pids and memory directories, with the limits of the
// latest execution written (an execution with other limits rewrites them
// when it takes one). Their names, p-<daemon pid>-<its start ticks>-<n>, say
// which daemon made them, so a daemon that starts after a crash can remove
// its predecessor's (removeStalePools).
type cgroupPool struct {
	r      *Runner
	prefix string
	seq    atomic.Uint64
	ready  chan *cgroup.Cgroup
	last   atomic.Pointer[cgroup.Limits] // limits written ahead
	kick   chan struct{}                 // the refill gate became quiet: refill
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	reserved map[string]*cgroup.Cgroup // execution id -> its cgroup (nil: made at spawn)
	closed   bool
}

const poolPrefix = "p-"

func newCgroupPool(r *Runner) *cgroupPool {
	start := uint64(0)
	if pi, ok := proctree.Read(r.self); ok {
		start = pi.Start
	}
	cp := &cgroupPool{
		r:        r,
		prefix:   fmt.Sprintf("%s%d-%d-", poolPrefix, r.self, start),
		ready:    make(chan *cgroup.Cgroup, poolSize),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		reserved: map[string]*cgroup.Cgroup{},
	}
	go cp.fill()
	return cp
}

// fill fills the pool at start and when the refill gate is quiet (see
// netnsPool.fill).
func (cp *cgroupPool) fill() {
	defer close(cp.done)
	for {
		for len(cp.ready) < cap(cp.ready) && cp.r.refillQuiet() { // only fill sends: never blocks
			select {
			case <-cp.stop:
				return
			default:
			}
			cg, err := cp.make(false)
			if err != nil {
				break // spawns make their cgroups inline meanwhile; try again later
			}
			cp.ready <- cg
		}
		select {
		case <-cp.kick:
		case <-time.After(time.Second):
		case <-cp.stop:
			return
		}
	}
}

func (cp *cgroupPool) refill() {
	if cp != nil {
		select {
		case cp.kick <- struct{}{}:
		default:
		}
	}
}

// make makes a cgroup with the latest limits; joined: for a process that
// joins its v1 cgroups after its fork (cgroup.Cgroup.JoinV1).
func (cp *cgroupPool) make(joined bool) (*cgroup.Cgroup, error) {
	cg, err := cp.r.tree.Make(cp.prefix+strconv.FormatUint(cp.seq.Add(1), 10), joined)
	if err != nil {
		return nil, err
	}
	if last := cp.last.Load(); last != nil {
		if err := cp.r.tree.ApplyLimits(cg, *last); err != nil {
			cg.Remove()
			return nil, err
		}
	}
	return cg, nil
}

func (cp *cgroupPool) take() *cgroup.Cgroup {
	select {
	case cg := <-cp.ready:
		return cg
	default:
		return nil
	}
}

// reserve hands the execution id a cgroup now, so its path can go into the
// durable intent before the spawn; nil when the pool is empty (the spawn then
// makes x-<id> as without a pool).
func (cp *cgroupPool) reserve(id string) *cgroup.Cgroup {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cg, ok := cp.reserved[id]; ok || cp.closed {
		return cg
	}
	cg := cp.take()
	cp.reserved[id] = cg
	return cg
}

// claim is the cgroup for an execution starting now: its reservation, or
// one from the pool; ok is false when there is none (make it inline).
func (cp *cgroupPool) claim(id string, spec Spec) (cg *cgroup.Cgroup, ok bool) {
	if cp == nil {
		return nil, false
	}
	cp.mu.Lock()
	cg, reserved := cp.reserved[id]
	delete(cp.reserved, id)
	cp.mu.Unlock()
	if !reserved {
		cg = cp.take()
	}
	if cg == nil {
		return nil, false
	}
	lim := limitsOf(spec)
	if last := cp.last.Load(); last == nil || *last != lim {
		cp.last.Store(&lim)
	}
	return cg, true
}

func (cp *cgroupPool) close() {
	if cp == nil {
		return
	}
	cp.mu.Lock()
	if cp.closed {
		cp.mu.Unlock()
		return
	}
	cp.closed = true
	cp.mu.Unlock()
	close(cp.stop)
	<-cp.done
	cp.mu.Lock()
	for id, cg := range cp.reserved {
		if cg != nil {
			cg.Remove()
		}
		delete(cp.reserved, id)
	}
	cp.mu.Unlock()
	for {
		select {
		case cg := <-cp.ready:
			cg.Remove()
		default:
			return
		}
	}
}

// removeStalePools kills what is left in the pooled cgroups of a termd that
// is no longer running (it crashed: an execution that was running has its
// intent, and becomes outcome_unknown) and removes them.
func (r *Runner) removeStalePools() {
	r.tree.RemoveStale(stalePool)
}

// stalePool: name is a pooled cgroup's whose daemon (pid and start time) is
// gone.
func stalePool(name string) bool {
	rest, ok := strings.CutPrefix(name, poolPrefix)
	f := strings.Split(rest, "-")
	if !ok || len(f) != 3 {
		return false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	pi, alive := proctree.Read(pid)
	return !alive || pi.Start != start
}

// startPools starts the spawn pools this Runner can use.
func (r *Runner) startPools() {
	// The calling thread's priority is the daemon's: the pools' filler
	// threads lower theirs, and one of them may be the main thread, so the
	// process's (main thread's) value is not reliable once a pool runs.
	prio, prioErr := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if r.caps.NetNS {
		if np, err := newNetnsPool(r.refillQuiet); err == nil {
			r.netns = np
		}
	}
	if r.tree.Parent != "" {
		r.cgPool = newCgroupPool(r)
		if r.caps.NetNS && prioErr == nil {
			r.nice = 20 - prio // the raw call answers 20-nice
			r.launchers = newLauncherPool(r)
		}
	}
}

// refillPools kicks the fillers (releaseRefill, when no execution is
// starting or young any more).
func (r *Runner) refillPools() {
	r.netns.refill()
	r.cgPool.refill()
	r.launchers.refill()
}

func (r *Runner) closePools() {
	r.launchers.close()
	r.netns.close()
	r.cgPool.close()
}

// poolStatus says what the spawn pools hold (tests print it).
func (r *Runner) poolStatus() string {
	var parts []string
	switch {
	case r.netns == nil:
		parts = append(parts, "network namespaces: made at spawn")
	case r.netns.err.Load() != nil:
		parts = append(parts, "network namespaces: made at spawn ("+(*r.netns.err.Load()).Error()+")")
	default:
		parts = append(parts, fmt.Sprintf("network namespaces: %d ready (%d made, %d reused, %d let go)", len(r.netns.ready), r.netns.made.Load(), r.netns.reused.Load(), r.netns.dropped.Load()))
	}
	if r.cgPool == nil {
		parts = append(parts, "cgroups: made at spawn")
	} else {
		parts = append(parts, fmt.Sprintf("cgroups: %d ready", len(r.cgPool.ready)))
	}
	switch {
	case r.launchers == nil:
		parts = append(parts, "launchers: started at spawn")
	case r.launchers.err.Load() != nil:
		parts = append(parts, fmt.Sprintf("launchers: %d ready (last start failed: %v)", len(r.launchers.ready), *r.launchers.err.Load()))
	default:
		parts = append(parts, fmt.Sprintf("launchers: %d ready", len(r.launchers.ready)))
	}
	return strings.Join(parts, "; ")
}
