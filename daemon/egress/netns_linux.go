//go:build linux

package egress

import (
	"errors"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// ListenInNetns listens on addr (e.g. "127.0.0.1:0") inside the network
// namespace nsfd refers to, with that namespace's loopback brought up. The
// socket keeps its namespace for life, so only processes in that namespace
// can connect, while the proxy's outbound connections are made from the
// daemon's own namespace.
func ListenInNetns(nsfd int, addr string) (net.Listener, error) {
	var l net.Listener
	err := onThread(nsfd, func() error {
		if err := loopbackUp(); err != nil {
			return err
		}
		var err error
		if l, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("listen on %s in the execution's network namespace: %w", addr, err)
		}
		return nil
	})
	return l, err
}

// NewNetns makes a new network namespace with loopback up and no other
// interface (so no route out), and returns a descriptor of it (close it when
// done; the namespace lives while the descriptor or a process holds it).
func NewNetns() (int, error) {
	fd := -1
	err := onThread(-1, func() error {
		if err := loopbackUp(); err != nil {
			return err
		}
		var err error
		if fd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("open the new network namespace: %w", err)
		}
		return nil
	})
	return fd, err
}

// onThread runs f on a locked OS thread inside the namespace nsfd (-1: a
// new one), then takes the thread back to the namespace it came from and
// unlocks it. A thread that cannot go back is never reused: it ends with its
// goroutine. Threads are otherwise never ended here: a thread's end would
// SIGKILL every child it once forked with Pdeathsig (pooled launchers).
func onThread(nsfd int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open the daemon's network namespace: %w", err)
			return
		}
		defer unix.Close(own)
		if nsfd < 0 {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				errc <- fmt.Errorf("make a network namespace: %w", err)
				return
			}
		} else if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter the execution's network namespace: %w", err)
			return
		}
		err = f()
		if serr := unix.Setns(own, unix.CLONE_NEWNET); serr != nil {
			errc <- errors.Join(err, fmt.Errorf("return to the daemon's network namespace: %w", serr))
			return // still locked: the thread ends with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
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
