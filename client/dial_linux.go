//go:build linux

package client

import (
	"context"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waitConnect connects to a unix socket whose queue of connections waiting
// to be accepted is full, waiting in the kernel until termd accepts one
// (a blocking connect: the kernel wakes its waiters one at a time, oldest
// first, as termd accepts) for at most a second, or until ctx ends.
func waitConnect(ctx context.Context, path string) (net.Conn, error) {
	wait := time.Second
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if wait <= 0 {
		return nil, context.DeadlineExceeded
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	tv := unix.NsecToTimeval(wait.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: path, Net: "unix"}, Err: os.NewSyscallError("connect", err)}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return net.FileConn(f) // a non-blocking dup, in Go's poller
}
