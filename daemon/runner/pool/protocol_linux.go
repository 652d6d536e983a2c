package pool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/sandbox/launcher"
)

// The runner's side of a waiting launcher's protocol (launcher.Pooled),
// for a pre-started launcher and one started for its execution alike.

// SendConfig writes a waiting launcher's configuration to its socket
// ctl: the length, carrying files by SCM_RIGHTS, then cfg (launcher.Pooled).
func SendConfig(ctl *os.File, cfg []byte, files []*os.File) error {
	if len(cfg) == 0 || len(cfg) > 8<<20 {
		return fmt.Errorf("a launcher configuration of %d bytes", len(cfg))
	}
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(cfg)))
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	raw, err := ctl.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Write(func(fd uintptr) bool {
		for serr = unix.EINTR; serr == unix.EINTR; { // a signal in the call: again at once, not fatal
			serr = unix.Sendmsg(int(fd), hdr[:], oob, nil, 0)
		}
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err == nil {
		_, err = ctl.Write(cfg)
	}
	if err != nil {
		return fmt.Errorf("the launcher did not take its configuration: %w", err)
	}
	return nil
}

// AwaitConfined waits until the launcher (process pid), which made a mount
// namespace and was asked to say so, has confined itself (launcher.Confined
// on ctl), which it does while the intent is committed; if it ended instead,
// the error is its report. It then opens that namespace and returns the
// descriptor (-1 when it could not), which keeps the namespace alive after the
// command has exited: the kernel tears a mount namespace down (every mount of
// its copy released) in the exiting task before the parent is told of the
// exit, so a command that was its last holder made its exit seen that much
// later (the runner's Process.mntns). A launcher without a mount namespace is not asked:
// waiting for it would put its wake-up between the intent and the command
// whenever it confines itself slower than the intent commits.
func AwaitConfined(ctl, rep *os.File, pid int) (mntns int, err error) {
	var b [1]byte
	if _, err = io.ReadFull(ctl, b[:]); err == nil && b[0] != launcher.Confined {
		err = fmt.Errorf("the launcher sent %q instead of saying it was confined", b[0])
	}
	if err != nil {
		return -1, Ended(ctl, rep, err)
	}
	// Our unreaped child: its pid cannot be reused meanwhile.
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil // the command's exit tears it down, as without the hold
	}
	return fd, nil
}

// Release sends the go-ahead on ctl to a launcher that has confined itself
// and waits until it has exec'd the command (rep, the report pipe, closes)
// or has refused (a message says why; ctl is closed). After an exec ctl
// stays open: what the launcher passed on it before the go-ahead (its
// seccomp filter's listener, launcher.Filter) is the caller's to take
// (TakeFilter), and until then the descriptor in flight holds the filter.
func Release(ctl, rep *os.File) error {
	if _, err := ctl.Write([]byte{launcher.Go}); err != nil {
		return Ended(ctl, rep, err)
	}
	if err := report(rep, nil); err != nil {
		ctl.Close()
		return err
	}
	return nil
}

// TakeFilter receives, without waiting, what a released launcher passed on
// ctl after Confined (launcher.Filter: its seccomp filter's listener) and
// closes ctl. It returns that descriptor, which holds the filter (and its
// program) until it is closed, or -1 when none came (the launcher was not
// asked, or the kernel gave it no listener).
func TakeFilter(ctl *os.File) int {
	defer ctl.Close()
	raw, err := ctl.SyscallConn()
	if err != nil {
		return -1
	}
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4*launcher.MaxPassedFDs))
	fd := -1
	_ = raw.Control(func(s uintptr) {
		n, oobn, _, _, err := unix.Recvmsg(int(s), b[:], oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
		if err != nil || oobn == 0 {
			return
		}
		fds := receivedFDs(oob[:oobn])
		for i, f := range fds {
			if i == 0 && n == 1 && b[0] == launcher.Filter {
				fd = f
				continue
			}
			unix.Close(f) // nothing else is expected
		}
	})
	return fd
}

// receivedFDs are the descriptors SCM_RIGHTS messages in oob carried.
func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

// Ended closes ctl, reads the launcher's report to its end (at its
// exec, or its exit) and closes it: the report's message, else err, is why
// the command did not start.
func Ended(ctl, rep *os.File, err error) error {
	ctl.Close()
	return report(rep, err)
}

// report reads the launcher's report to its end and closes it (see Ended).
func report(rep *os.File, err error) error {
	msg, rerr := io.ReadAll(io.LimitReader(rep, 64<<10))
	rep.Close()
	switch {
	case len(msg) > 0:
		return errors.New(string(msg))
	case err != nil:
		return fmt.Errorf("the launcher ended before it was released: %w", err)
	case rerr != nil:
		return fmt.Errorf("reading the launcher's report: %w", rerr)
	}
	return nil
}
