package runner

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/pool"
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
	return pool.SendConfig(lp.ctl, c.Encode(), nil)
}

// confined waits until the launcher has confined itself, when it was asked
// to say so (see pool.AwaitConfined); -1 otherwise.
func (lp *launchPipes) confined(pid int) (mntns int, err error) {
	if !lp.sayConfined {
		return -1, nil
	}
	return pool.AwaitConfined(lp.ctl, lp.repR, pid)
}

// release lets the launcher exec the command and waits until it has (the
// report pipe closes; the socket stays open, see pool.Release) or has
// refused (a message arrives).
func (lp *launchPipes) release() error {
	return pool.Release(lp.ctl, lp.repR)
}

// launchConfig is the launcher's whole configuration for spec: the
// confinement the daemon prepared, the command and its credentials.
func launchConfig(spec Spec, env []string) launcher.Config {
	c := spec.Launch.Config
	c.Path, c.Argv, c.Env = spec.Path, spec.Argv, env
	c.HoldFilter = len(c.Seccomp) > 0 // see Process.filter
	if cr := spec.Credential; cr != nil {
		c.SetCred, c.UID, c.GID, c.Groups = true, cr.Uid, cr.Gid, cr.Groups
	}
	return c
}
