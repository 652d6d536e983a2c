package runner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/sandbox/launcher"
)

// launchPipes are the descriptors of one inline launcher start. The launcher
// takes the protocol of a pre-started one (launcher.Pooled): it waits on a
// configuration socket, gets its configuration at once (send, right after
// the fork, so it confines itself while the intent is committed) and execs
// the command only on the go-ahead (release); the report pipe closes at that
// exec, and a message on it is a refusal to confine. The plan's descriptors
// (l.Files) it inherits at FirstFD on, so none is passed on the socket.
type launchPipes struct {
	l      *launcher.Launch
	ctl    *os.File   // our end of the configuration socket
	repR   *os.File   // the report pipe's read end
	files  []*os.File // child ends: ConfigFD, ReportFD, then l.Files
	closed bool
	// sayConfined: the launcher makes a mount namespace, which the runner
	// holds (Process.mntns), so it is asked to say when it has.
	sayConfined bool
}

func newLaunchPipes(l *launcher.Launch) (*launchPipes, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	ctl := os.NewFile(uintptr(pair[0]), "launcher-config")
	sock := os.NewFile(uintptr(pair[1]), "launcher-config-child")
	repR, repW, err := os.Pipe()
	if err != nil {
		ctl.Close()
		sock.Close()
		return nil, err
	}
	lp := &launchPipes{l: l, ctl: ctl, repR: repR}
	lp.files = append([]*os.File{sock, repW}, l.Files...)
	return lp, nil
}

// closeChildEnds closes the daemon's copies of what the child received.
func (lp *launchPipes) closeChildEnds() {
	if lp.closed {
		return
	}
	lp.closed = true
	lp.files[0].Close()
	lp.files[1].Close()
	lp.l.Close()
}

// abandon cleans up after a failed start; a launcher still waiting reads the
// end of file and exits without running anything.
func (lp *launchPipes) abandon() {
	lp.closeChildEnds()
	lp.ctl.Close()
	lp.repR.Close()
}

// send gives the started launcher the command and its confinement.
func (lp *launchPipes) send(spec Spec, env []string) error {
	lp.closeChildEnds()
	c := launchConfig(spec, env)
	c.SayConfined = lp.l.NewMountNS || lp.l.Config.UserNS
	lp.sayConfined = c.SayConfined
	return sendLaunchConfig(lp.ctl, c.Encode(), nil)
}

// confined waits until the launcher has confined itself, when it was asked
// to say so (see awaitConfined); -1 otherwise.
func (lp *launchPipes) confined(pid int) (mntns int, err error) {
	if !lp.sayConfined {
		return -1, nil
	}
	return awaitConfined(lp.ctl, lp.repR, pid)
}

// release lets the launcher exec the command and waits until it has (the
// report pipe closes) or has refused (a message arrives).
func (lp *launchPipes) release() error {
	return releaseLauncher(lp.ctl, lp.repR)
}

// sendLaunchConfig writes a waiting launcher's configuration to its socket
// ctl: the length, carrying files by SCM_RIGHTS, then cfg (launcher.Pooled).
func sendLaunchConfig(ctl *os.File, cfg []byte, files []*os.File) error {
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

// awaitConfined waits until the launcher (process pid), which made a mount
// namespace and was asked to say so, has confined itself (launcher.Confined
// on ctl), which it does while the intent is committed; if it ended instead,
// the error is its report. It then opens that namespace and returns the
// descriptor (-1 when it could not), which keeps the namespace alive after the
// command has exited: the kernel tears a mount namespace down (every mount of
// its copy released) in the exiting task before the parent is told of the
// exit, so a command that was its last holder made its exit seen that much
// later (Process.mntns). A launcher without a mount namespace is not asked:
// waiting for it would put its wake-up between the intent and the command
// whenever it confines itself slower than the intent commits.
func awaitConfined(ctl, rep *os.File, pid int) (mntns int, err error) {
	var b [1]byte
	if _, err = io.ReadFull(ctl, b[:]); err == nil && b[0] != launcher.Confined {
		err = fmt.Errorf("the launcher sent %q instead of saying it was confined", b[0])
	}
	if err != nil {
		return -1, launcherEnded(ctl, rep, err)
	}
	// Our unreaped child: its pid cannot be reused meanwhile.
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil // the command's exit tears it down, as without the hold
	}
	return fd, nil
}

// releaseLauncher sends the go-ahead on ctl (and closes it) to a launcher
// that has confined itself and waits until it has exec'd the command (rep,
// the report pipe, closes) or has refused (a message says why).
func releaseLauncher(ctl, rep *os.File) error {
	_, err := ctl.Write([]byte{launcher.Go})
	return launcherEnded(ctl, rep, err)
}

// launcherEnded closes ctl, reads the launcher's report to its end (at its
// exec, or its exit) and closes it: the report's message, else err, is why
// the command did not start.
func launcherEnded(ctl, rep *os.File, err error) error {
	ctl.Close()
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

// launchConfig is the launcher's whole configuration for spec: the
// confinement the daemon prepared, the command and its credentials.
func launchConfig(spec Spec, env []string) launcher.Config {
	c := spec.Launch.Config
	c.Path, c.Argv, c.Env = spec.Path, spec.Argv, env
	if cr := spec.Credential; cr != nil {
		c.SetCred, c.UID, c.GID, c.Groups = true, cr.Uid, cr.Gid, cr.Groups
	}
	return c
}
