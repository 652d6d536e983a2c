package pool

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/sandbox/launcher"
)

// NetNS keeps network namespaces, as descriptors: fresh ones made by one
// dedicated thread, and ones whose execution ended, checked by that thread
// (Recycle).
type NetNS struct {
	own   int           // the daemon's own network namespace
	ready chan int      // empty namespaces: fresh, or reused and checked
	back  chan int      // namespaces whose execution ended, to check (Recycle)
	quiet func() bool   // may fill now (Gate.Quiet)
	kick  chan struct{} // the gate became quiet: refill
	stop  chan struct{}
	done  chan struct{}
	err   atomic.Pointer[error] // why the filler stopped early
	once  sync.Once
	buf   [4096]byte // the filler's, for the files a check reads

	mu     sync.Mutex // recycle against close
	closed bool
	// made, reused, dropped: namespaces made, handed back after a check,
	// and let go (a check failed, or the pool was full).
	made, reused, dropped atomic.Uint64
}

// netnsKept bounds the namespaces the pool holds (ready plus waiting for
// their check): fresh ones are made up to Size, reused ones kept up to
// this many; beyond it a namespace whose execution ended is let go.
const netnsKept = 4 * Size

// NewNetNS starts a pool of network namespaces, filled while quiet says so.
func NewNetNS(quiet func() bool) (*NetNS, error) {
	own, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the daemon's network namespace: %w", err)
	}
	np := &NetNS{own: own, ready: make(chan int, netnsKept), back: make(chan int, netnsKept), quiet: quiet, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go np.fill()
	return np, nil
}

// fill runs on a thread of its own for its whole life: the thread moves
// between namespaces, so it stays locked and ends with the goroutine instead
// of going back to the runtime. It never starts a process, so its end cannot
// take a child with it (Pdeathsig). It fills the pool at start and whenever
// no execution is starting or young (Gate), not when a namespace is
// taken: then it would compete with the spawn, the intent's commit and the
// command for the CPU.
//
// Namespaces handed back (Recycle) are checked at once, gate or not: a
// check is a few reads, where making a namespace is a quarter of a
// millisecond of CPU here and as much again for the kernel to tear the
// old one down.
func (np *NetNS) fill() {
	defer close(np.done)
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice)
	for {
		for len(np.ready) < Size && len(np.back) == 0 && np.quiet() {
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
func (np *NetNS) put(fd int) bool {
	select {
	case np.ready <- fd:
		return true
	default:
		unix.Close(fd)
		np.dropped.Add(1)
		return false
	}
}

// Recycle hands back the namespace of an execution that ended (see
// ReusableNetNS): the filler checks it (pristineNetNS) and makes it ready
// again, or lets it go. The pool owns fd from here.
func (np *NetNS) Recycle(fd int) {
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
func (np *NetNS) check(fd int) error {
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		unix.Close(fd)
		np.dropped.Add(1)
		return nil
	}
	clean := pristineNetNS(&np.buf) == nil
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
// buf holds the files read (the filler's own: nothing is allocated for
// them; a file longer than buf is not a fresh namespace's).
func pristineNetNS(buf *[4096]byte) error {
	st, err := readProc("/proc/thread-self/net/sockstat", buf[:])
	if err != nil {
		return err
	}
	for line := range bytes.SplitSeq(st, []byte("\n")) {
		var f [8][]byte
		n := fields(line, &f)
		switch {
		case n >= 3 && string(f[0]) == "sockets:" && string(f[2]) != "0":
			return fmt.Errorf("%s sockets in use", f[2])
		case n >= 7 && string(f[0]) == "TCP:" && string(f[5]) == "tw" && string(f[6]) != "0": // (orphan counts the host's)
			return fmt.Errorf("TCP sockets left in TIME_WAIT: %s", f[6])
		}
	}
	dev, err := readProc("/proc/thread-self/net/dev", buf[:])
	if err != nil {
		return err
	}
	// Two heading lines, then one line per device.
	dev = bytes.TrimSpace(dev)
	if bytes.Count(dev, []byte("\n")) != 2 || !bytes.HasPrefix(bytes.TrimSpace(dev[bytes.LastIndexByte(dev, '\n'):]), []byte("lo:")) {
		return fmt.Errorf("devices other than the loopback: %q", dev)
	}
	return loopbackDown()
}

// loopbackDown says, on a thread inside a network namespace, whether its
// loopback is down and without an address. nil: it is.
func loopbackDown() error {
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

// readProc reads a /proc file whole into buf, with a descriptor of its own
// and no os.File (os.ReadFile's stat, poller registration and buffer of
// its own double the CPU of the read); a file longer than buf is an error.
// Not a descriptor kept open: a /proc/thread-self/net file opened is the
// namespace's the thread was in at the open, and holding it would hold the
// namespace for as long, past the pool's hands (a namespace taken is
// closed by whoever took it).
func readProc(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	for off := 0; ; {
		if off == len(buf) {
			return nil, fmt.Errorf("%s: longer than %d bytes", path, len(buf))
		}
		n, err := unix.Read(fd, buf[off:])
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf[:off], nil
		}
		off += n
	}
}

// fields splits line at spaces into f, as strings.Fields would, keeping
// the first len(f) fields; it returns how many it kept.
func fields(line []byte, f *[8][]byte) int {
	n := 0
	for n < len(f) {
		line = bytes.TrimLeft(line, " \t")
		if len(line) == 0 {
			break
		}
		end := bytes.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		f[n], line = line[:end], line[end:]
		n++
	}
	return n
}

// Refill asks the filler to top the pool up.
func (np *NetNS) Refill() {
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
func (np *NetNS) make() (int, error) {
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

// Take returns a fresh namespace's descriptor (the caller closes it), or -1
// when none is ready.
func (np *NetNS) Take() int {
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

// ReusableNetNS says whether the network namespace of an execution whose
// launcher has configuration c may serve another execution once every
// process of it is gone. What outlives a namespace's processes is what a
// capability changes (devices, addresses, routes, firewall rules) or the
// host's uid 0 may write without one (its net sysctls), and sockets passed
// to a process outside. So the launcher must empty the capability bounding
// set with no_new_privs (DropCaps, NoNewPrivs: no exec gains one back) and
// the command must not be the host's uid 0 (it switches to another uid, or
// it is root mapped to an unprivileged uid by a user namespace); and
// pristineNetNS checks, at every reuse, that no socket is left.
func ReusableNetNS(c launcher.Config) bool {
	return c.DropCaps && c.NoNewPrivs && !c.UserNS && (c.UserNSFD > 0 || (c.SetCred && c.UID != 0))
}

// Close stops the filler and closes every namespace the pool holds.
func (np *NetNS) Close() {
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

// Ready is how many namespaces are ready.
func (np *NetNS) Ready() int { return len(np.ready) }

// Status says what the pool holds (tests print it).
func (np *NetNS) Status() string {
	switch {
	case np == nil:
		return "network namespaces: made at spawn"
	case np.err.Load() != nil:
		return "network namespaces: made at spawn (" + (*np.err.Load()).Error() + ")"
	}
	return fmt.Sprintf("network namespaces: %d ready (%d made, %d reused, %d let go)", len(np.ready), np.made.Load(), np.reused.Load(), np.dropped.Load())
}
