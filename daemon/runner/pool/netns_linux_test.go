//go:build linux

package pool

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newNetNS starts a namespace pool that may always fill, closed when the
// test ends, and waits until it is full; a host where no namespace can be
// made skips the test.
func newNetNS(t *testing.T) *NetNS {
	t.Helper()
	np, err := NewNetNS(func() bool { return true })
	if err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	t.Cleanup(np.Close)
	deadline := time.Now().Add(20 * time.Second)
	for np.Ready() < Size {
		if e := np.err.Load(); e != nil {
			t.Skipf("no network namespaces here: %v", *e)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the namespace pool did not fill: %s", np.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return np
}

// A network namespace handed back to the pool is made ready again only when
// it is as a fresh one: one with a socket left in it (an abstract unix
// listener held from outside), whose loopback was brought up or given an
// address, or with a device besides the loopback (a persistent tap) is let
// go.
func TestRecycledNetnsChecked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs network namespaces and root")
	}
	np := newNetNS(t)
	// fresh makes a namespace on a locked thread and runs in inside it. The
	// thread is never unlocked: it ends with its goroutine, wherever it is.
	fresh := func(in func()) int {
		var fd int
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			if fd, err = np.make(); err != nil {
				return
			}
			if err = unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				return
			}
			in()
			err = unix.Setns(np.own, unix.CLONE_NEWNET)
		}()
		<-done
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	waitCount := func(what string, c interface{ Load() uint64 }, want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for c.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, np.Status())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	dropped, reused := np.dropped.Load(), np.reused.Load()
	var held int
	np.Recycle(fresh(func() {
		var err error
		if held, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			t.Error(err)
		}
		if err := unix.Bind(held, &unix.SockaddrUnix{Name: fmt.Sprintf("@termd-recycle-%d", os.Getpid())}); err != nil {
			t.Error(err)
		}
	}))
	defer unix.Close(held)
	waitCount("a namespace with a socket left was not let go", &np.dropped, dropped+1)
	np.Recycle(fresh(func() {
		setLoopback(t, unix.SIOCSIFFLAGS, func(ifr *unix.Ifreq) error { ifr.SetUint16(unix.IFF_UP); return nil })
	}))
	waitCount("a namespace whose loopback is up was not let go", &np.dropped, dropped+2)
	np.Recycle(fresh(func() {
		setLoopback(t, unix.SIOCSIFADDR, func(ifr *unix.Ifreq) error { return ifr.SetInet4Addr([]byte{127, 0, 0, 1}) })
	}))
	waitCount("a namespace whose loopback has an address (and is down) was not let go", &np.dropped, dropped+3)
	var tap bool
	np.Recycle(fresh(func() { tap = addTap(t) }))
	if tap {
		waitCount("a namespace with a device besides the loopback was not let go", &np.dropped, dropped+4)
	}
	if np.reused.Load() != reused {
		t.Fatalf("a namespace with something left in it was reused: %s", np.Status())
	}
	np.Recycle(fresh(func() {}))
	waitCount("an untouched namespace was not reused", &np.reused, reused+1)
	t.Log(np.Status())
}

// addTap makes a persistent tap device, down and without an address, in
// the calling thread's network namespace; false, and the test failed,
// where it cannot (no /dev/net/tun: the case is required, not skipped).
func addTap(t *testing.T) bool {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Errorf("the extra-device case needs a tap device: %v", err)
		return false
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("termd-tap0")
	if err != nil {
		t.Fatal(err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		t.Errorf("the extra-device case needs a tap device: %v", err)
		return false
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
		t.Fatal(err)
	}
	return true
}

// setLoopback sets what set puts in a request for the loopback (ioctl req)
// in the calling thread's network namespace.
func setLoopback(t *testing.T, req uint, set func(*unix.Ifreq) error) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Error(err)
		return
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err == nil {
		err = set(ifr)
	}
	if err == nil {
		err = unix.IoctlIfreq(s, req, ifr)
	}
	if err != nil {
		t.Error(err)
	}
}
