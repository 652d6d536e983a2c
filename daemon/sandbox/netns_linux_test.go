package sandbox_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/netns"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/internal/program"
)

// An execution joined to a workspace loopback (runner.Spec.JoinNetNS) is in
// it whichever way its launcher starts: inline (the forking thread entered
// the namespace), pre-started (the launcher joins it first), and for a
// command run for root, which then enters a user namespace (root mapped to
// an unprivileged uid): it reaches a listener in that namespace and not one
// on the host's loopback.
func TestLaunchersJoinTheWorkspaceLoopback(t *testing.T) {
	f, inline := newPoolFixture(t)
	m, err := netns.New(nil)
	if err != nil {
		t.Skip(err)
	}
	defer m.Close()
	h, err := m.Acquire(netns.Key{Principal: "uid:0", Workspace: f.ws})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	inner, err := m.Listen(h, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	go acceptAll(inner)
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go acceptAll(host)

	run := func(r *runner.Runner, rootMap uint32, addr string) (string, bool) {
		t.Helper()
		ww := workspaceWrite
		ww.Exec = program.Exec(f.probe)
		paths := f.paths
		paths.NetNS, paths.RootMap = true, rootMap
		l, rec, err := sandbox.Prepare(ww, paths, sandbox.Required, f.sup)
		if err != nil || rec.Level != sandbox.LevelFull {
			t.Fatalf("prepare: %v %v", err, rec.Missing)
		}
		proc, err := r.Start(runner.Spec{Path: f.probe, Argv: []string{f.probe, "connect", addr}, Dir: f.ws, Timeout: 20 * time.Second,
			JoinNetNS: true, NetNSFD: h.Fd(), Launch: l})
		if err != nil {
			t.Fatal(err)
		}
		res := proc.Wait()
		if res.Err != nil {
			return "spawn: " + res.Err.Error(), proc.Prestarted()
		}
		if !res.NetNSApplied {
			t.Errorf("a joined execution says it ran in the host's network namespace")
		}
		return strings.TrimSpace(string(res.Stdout.Kept) + string(res.Stderr.Kept)), proc.Prestarted()
	}
	run(f.run, 0, inner.Addr().String()) // names the launcher binary; the pool fills then
	pooled := 0
	for round := range 6 {
		for _, c := range []struct {
			name string
			r    *runner.Runner
		}{{"inline", inline}, {"pool", f.run}} {
			rootMap := uint32(0)
			if round%2 == 1 {
				rootMap = sandbox.DefaultRootMapUID
			}
			time.Sleep(20 * time.Millisecond) // let the pool refill
			got, pre := run(c.r, rootMap, inner.Addr().String())
			if pre {
				pooled++
			}
			if got != "ok" {
				t.Errorf("%s (pre-started %v, root mapped %v): connect inside the loopback: %q", c.name, pre, rootMap != 0, got)
			}
			got, _ = run(c.r, rootMap, host.Addr().String())
			if !strings.Contains(got, "connection refused") {
				t.Errorf("%s (root mapped %v): connect to the host's loopback: %q, want connection refused", c.name, rootMap != 0, got)
			}
		}
	}
	if pooled == 0 {
		t.Error("no joined execution ran in a pre-started launcher")
	}
}

func acceptAll(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
