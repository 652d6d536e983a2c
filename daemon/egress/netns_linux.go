//go:build linux

package egress

import (
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// ListenInNetns listens on addr (e.g. "127.0.0.1:0") inside the network
// namespace nsfd refers to, with that namespace's loopback brought up. The
// socket keeps its namespace for life, so only processes in that namespace
// can connect, while the proxy's outbound connections are made from the
// daemon's own namespace. The work happens on a locked OS thread that is
// discarded afterwards (its goroutine ends locked), so no other goroutine
// ever runs in the execution's namespace.
func ListenInNetns(nsfd int, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread ends with the goroutine.
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter the execution's network namespace: %w", err)}
			return
		}
		if err := loopbackUp(); err != nil {
			ch <- result{err: err}
			return
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			err = fmt.Errorf("listen on %s in the execution's network namespace: %w", addr, err)
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// NewNetns makes a new network namespace with loopback up and no other
// interface (so no route out), and returns a descriptor of it (close it when
// done; the namespace lives while the descriptor or a process holds it). It
// is made on a locked OS thread that is then discarded.
func NewNetns() (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread ends with the goroutine.
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, fmt.Errorf("make a network namespace: %w", err)}
			return
		}
		if err := loopbackUp(); err != nil {
			ch <- result{-1, err}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			err = fmt.Errorf("open the new network namespace: %w", err)
		}
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

// loopbackUp sets lo up in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up loopback: %w", err)
	}
	flags := ifr.Uint16()
	if flags&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(flags | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up loopback: %w", err)
	}
	return nil
}
