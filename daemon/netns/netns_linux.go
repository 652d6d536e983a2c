package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Manager keeps the workspace loopbacks of one daemon.
type Manager struct {
	idle func() time.Duration
	own  int // the daemon's own network namespace

	mu     sync.Mutex
	spaces map[Key]*space
	closed bool
}

type space struct {
	key       Key
	fd        int
	users     int
	created   time.Time
	idleSince time.Time
	timer     *time.Timer
}

// Handle is one user's hold on a namespace.
type Handle struct {
	m    *Manager
	s    *space
	once sync.Once
}

// New returns a manager whose namespaces are kept idle for idle() (read at
// each last release; nil or not positive: DefaultIdle), or ErrUnavailable
// when this process cannot make network namespaces (it is not root).
func New(idle func() time.Duration) (*Manager, error) {
	own, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &ErrUnavailable{Why: "cannot open the daemon's network namespace: " + err.Error()}
	}
	return &Manager{idle: idle, own: own, spaces: map[Key]*space{}}, nil
}

// Acquire returns a hold on k's namespace, making it on first use. Release
// the handle when the execution (or forward) ends.
func (m *Manager) Acquire(k Key) (*Handle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("the daemon is stopping")
	}
	s := m.spaces[k]
	if s == nil {
		fd, err := m.make()
		if err != nil {
			return nil, err
		}
		s = &space{key: k, fd: fd, created: time.Now()}
		m.spaces[k] = s
	}
	return m.holdLocked(s), nil
}

// Fd is the namespace's descriptor (valid while the handle is held); -1 for
// no handle.
func (h *Handle) Fd() int {
	if h == nil {
		return -1
	}
	return h.s.fd
}

// Key is the namespace's key.
func (h *Handle) Key() Key { return h.s.key }

// Release lets go of the namespace; the last release starts its idle time.
func (h *Handle) Release() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		m, s := h.m, h.s
		m.mu.Lock()
		defer m.mu.Unlock()
		s.users--
		if s.users > 0 || m.spaces[s.key] != s {
			return
		}
		s.idleSince = time.Now()
		idle := DefaultIdle
		if m.idle != nil && m.idle() > 0 {
			idle = m.idle()
		}
		s.timer = time.AfterFunc(idle, func() { m.expire(s) })
	})
}

func (m *Manager) expire(s *space) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.users > 0 || m.spaces[s.key] != s {
		return
	}
	delete(m.spaces, s.key)
	unix.Close(s.fd)
}

// List describes the namespaces kept now.
func (m *Manager) List() []Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Info, 0, len(m.spaces))
	for _, s := range m.spaces {
		out = append(out, Info{Key: s.key, Users: s.users, Created: s.created, IdleSince: s.idleSince})
	}
	return sortInfos(out)
}

// Close lets go of every namespace (the daemon is stopping).
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	for k, s := range m.spaces {
		if s.timer != nil {
			s.timer.Stop()
		}
		unix.Close(s.fd)
		delete(m.spaces, k)
	}
	unix.Close(m.own)
}

// make creates a namespace with its loopback up on a thread of its own and
// returns a descriptor of it.
func (m *Manager) make() (fd int, err error) {
	err = m.onThread(-1, func() error {
		var ferr error
		fd, ferr = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if ferr != nil {
			return fmt.Errorf("open the new network namespace: %w", ferr)
		}
		if ferr = loopbackUp(); ferr != nil {
			unix.Close(fd)
			return ferr
		}
		return nil
	})
	if err != nil {
		return -1, &ErrUnavailable{Why: err.Error()}
	}
	return fd, nil
}

// onThread runs f on a locked thread that is in the namespace fd (-1: a new
// one), then takes the thread back to the daemon's namespace; a thread that
// cannot go back ends with its goroutine instead of serving others.
func (m *Manager) onThread(fd int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var err error
		if fd < 0 {
			err = unix.Unshare(unix.CLONE_NEWNET)
			if err != nil {
				err = fmt.Errorf("unshare a network namespace: %w", err)
			}
		} else if err = unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			err = fmt.Errorf("enter the workspace loopback: %w", err)
		}
		if err != nil {
			errc <- err
			return // the thread may be anywhere: it ends with the goroutine
		}
		err = f()
		if serr := unix.Setns(m.own, unix.CLONE_NEWNET); serr != nil {
			errc <- errors.Join(err, fmt.Errorf("return to the daemon's network namespace: %w", serr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// loopbackUp brings up lo in the calling thread's namespace.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("a socket to bring up lo: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	return nil
}

// holdLocked adds a user to s, stopping its idle timer. m.mu is held.
func (m *Manager) holdLocked(s *space) *Handle {
	s.users++
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.idleSince = time.Time{}
	return &Handle{m: m, s: s}
}

// held returns a hold on k's namespace if it exists.
func (m *Manager) held(k Key) (*Handle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.spaces[k]
	if s == nil || m.closed {
		return nil, noSpace(k)
	}
	return m.holdLocked(s), nil
}

// Hold returns a hold on k's namespace when it exists (a port forward keeps
// it while it is open), and an error naming k when it does not.
func (m *Manager) Hold(k Key) (*Handle, error) { return m.held(k) }

// Dial connects to addr (e.g. "127.0.0.1:8000") from inside the namespace h
// holds.
func (m *Manager) Dial(ctx context.Context, h *Handle, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := m.onThread(h.s.fd, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on addr inside the namespace h holds; the listener stays
// there whichever thread accepts on it.
func (m *Manager) Listen(h *Handle, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := m.onThread(h.s.fd, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Check makes a namespace, brings its loopback up, enters it, listens and
// connects on its loopback, and lets it go: what termd doctor reports.
func Check() error {
	m, err := New(func() time.Duration { return time.Millisecond })
	if err != nil {
		return err
	}
	defer m.Close()
	h, err := m.Acquire(Key{Principal: "doctor", Workspace: "/"})
	if err != nil {
		return err
	}
	defer h.Release()
	l, err := m.Listen(h, "tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen in a workspace loopback: %w", err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := m.Dial(ctx, h, "tcp", l.Addr().String())
	if err != nil {
		return fmt.Errorf("connect inside a workspace loopback: %w", err)
	}
	return c.Close()
}
