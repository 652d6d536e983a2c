package runner

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/termd/termd/daemon/sandbox/launcher"
)

// launchPipes are the descriptors of one launcher start: the configuration
// pipe (the launcher waits on it before doing anything, so nothing runs
// until the daemon releases it) and the report pipe (closed by the exec of
// the command; a message on it is a refusal to confine).
type launchPipes struct {
	l      *launcher.Launch
	cfgW   *os.File
	repR   *os.File
	files  []*os.File // child ends: ConfigFD, ReportFD, then l.Files
	closed bool
}

func newLaunchPipes(l *launcher.Launch) (*launchPipes, error) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		cfgW.Close()
		return nil, err
	}
	lp := &launchPipes{l: l, cfgW: cfgW, repR: repR}
	lp.files = append([]*os.File{cfgR, repW}, l.Files...)
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

// abandon cleans up after a failed start.
func (lp *launchPipes) abandon() {
	lp.closeChildEnds()
	lp.cfgW.Close()
	lp.repR.Close()
}

// release sends the command to the launcher and waits until it has exec'd
// it (the report pipe closes) or refused (a message arrives).
func (lp *launchPipes) release(spec Spec, env []string) error {
	lp.closeChildEnds()
	c := launchConfig(spec, env)
	_, err := lp.cfgW.Write(c.Encode())
	lp.cfgW.Close()
	msg, rerr := io.ReadAll(io.LimitReader(lp.repR, 64<<10))
	lp.repR.Close()
	switch {
	case len(msg) > 0:
		return errors.New(string(msg))
	case err != nil:
		return fmt.Errorf("the launcher ended before it received the command: %w", err)
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
