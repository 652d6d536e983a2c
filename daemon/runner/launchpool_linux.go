package runner

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/pool"
	"github.com/termd/termd/daemon/sandbox/launcher"
)

// An execution in a pre-started launcher (pool.Launchers, pool.Launcher):
// the launcher gets the plan's configuration and descriptors at once, so it
// confines itself while the intent is committed, and the byte that lets it
// exec the command only after BeforeRelease.

// spawnPooled starts the execution in a pre-started launcher: its cgroup
// gets spec's limits, the launcher its configuration (it confines itself
// meanwhile), and only after BeforeRelease the go-ahead to exec.
func (p *Process) spawnPooled(pl *pool.Launcher) (err error) {
	r, spec := p.r, p.spec
	p.prestarted = true
	p.cg, p.name, p.netns = pl.Cgroup, filepath.Base(pl.Cgroup.Path()), true
	p.pidfd = pl.PidFD
	p.pipes = pl.Out
	p.ns, pl.NS = pl.NS, -1 // spawnFailed closes it
	fail := func(err error) error {
		p.letGo()
		pl.Ctl.Close()
		_ = pl.Proc.Kill()
		_, _ = pl.Proc.Wait()
		pl.Report.Close()
		for i, f := range p.pipes {
			f.Close()
			p.pipes[i] = nil
		}
		return p.spawnFailed(err) // closes the pidfd and the mount namespace
	}
	if err := r.tree.ApplyLimits(pl.Cgroup, limitsOf(spec)); err != nil {
		spec.Launch.Close()
		return fail(err)
	}
	if err := pl.Cgroup.JoinV1(pl.Proc.Pid); err != nil { // a v1 cgroup its limits added
		spec.Launch.Close()
		return fail(err)
	}
	c, err := r.pooledConfig(spec)
	if err != nil {
		spec.Launch.Close()
		return fail(err)
	}
	// A joined launcher leaves its pooled namespace before anything runs.
	if !spec.JoinNetNS && !pool.ReusableNetNS(c) && p.ns >= 0 {
		unix.Close(p.ns)
		p.ns = -1
	}
	files := spec.Launch.Files
	if spec.JoinNetNS {
		// Born in a pooled empty namespace, it joins the workspace
		// loopback before anything else (launcher.Config.NetNSFD).
		fd, derr := unix.FcntlInt(uintptr(spec.NetNSFD), unix.F_DUPFD_CLOEXEC, 0)
		if derr != nil {
			spec.Launch.Close()
			return fail(fmt.Errorf("the workspace loopback's descriptor: %w", derr))
		}
		ns := os.NewFile(uintptr(fd), "workspace-netns")
		defer ns.Close()
		c.NetNSFD = launcher.FirstFD + len(files)
		files = append(files[:len(files):len(files)], ns)
	}
	err = pool.SendConfig(pl.Ctl, c.Encode(), files)
	spec.Launch.Close() // the launcher holds its copies now
	if err != nil {
		return fail(err)
	}
	// It confines itself while the intent is committed.
	if c.SayConfined {
		mntns, err := pool.AwaitConfined(pl.Ctl, pl.Report, pl.Proc.Pid)
		if err != nil {
			return fail(err) // its report: nothing ran
		}
		p.mntns.Store(int32(mntns))
	}
	if spec.BeforeRelease != nil {
		if err := spec.BeforeRelease(); err != nil {
			return fail(err) // the launcher never gets its 'g': nothing ran
		}
	}
	if err := pool.Release(pl.Ctl, pl.Report); err != nil {
		return fail(err)
	}
	p.launcherCtl = pl.Ctl // supervise takes the filter from it
	p.setMain(pl.Proc, pl.Start)
	return nil
}

// pooledConfig is the configuration a pre-started launcher gets for spec:
// what an inline one gets, and what an inline one is given at its clone
// (its working directory, its mount namespace, the daemon's nice value).
func (r *Runner) pooledConfig(spec Spec) (launcher.Config, error) {
	env := make([]string, len(spec.Env))
	copy(env, spec.Env)
	c := launchConfig(spec, env)
	c.Cwd, c.MountNS = spec.Dir, spec.Launch.NewMountNS
	if c.Cwd == "" { // Spec.Dir "" is the daemon's directory, as inline
		var err error
		if c.Cwd, err = os.Getwd(); err != nil {
			return c, fmt.Errorf("the daemon's working directory: %w", err)
		}
	}
	c.SetNice, c.Nice = true, r.nice
	c.SayConfined = c.MountNS
	return c, nil
}

// Prestarted says whether the execution ran in a pre-started launcher.
func (p *Process) Prestarted() bool { return p.prestarted }
