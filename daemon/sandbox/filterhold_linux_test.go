package sandbox_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/internal/program"
)

// The command's seccomp filter is held by the runner (its listener, passed
// by the launcher) from the release until the result is delivered, or a
// second after the result when nobody says so: the command's exit does not
// free the filter's program (a kernel worker that ran in the exit's way).
// The filter is the command's as before: a new user namespace is refused.
// Pre-started and inline launchers alike.
func TestSeccompFilterHeldUntilDelivered(t *testing.T) {
	f, inline := newPoolFixture(t)
	// held counts this process's descriptors on seccomp listeners.
	held := func() int {
		n := 0
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:seccomp notify" {
				n++
			}
		}
		return n
	}
	base := held()
	prestarted := 0
	for i, r := range []*runner.Runner{f.run, f.run, inline, inline} {
		if i > 0 && r == f.run {
			awaitPooled(t) // the first sandboxed start names the pool's launcher
		}
		ww := workspaceWrite
		ww.Exec = program.Exec(f.probe)
		l, rec, err := sandbox.Prepare(ww, f.paths, sandbox.Required, f.sup)
		if err != nil || rec.Level != sandbox.LevelFull {
			t.Fatalf("prepare: %v %v", err, rec.Missing)
		}
		proc, err := r.Start(runner.Spec{Path: f.probe, Argv: []string{f.probe, "unshare-user"}, Dir: f.ws, Timeout: 20 * time.Second, NoNetwork: true, Launch: l})
		if err != nil {
			t.Fatal(err)
		}
		res := proc.Wait()
		if out := strings.TrimSpace(string(res.Stdout.Kept)); res.Err != nil || !strings.HasPrefix(out, "denied") {
			t.Fatalf("run %d: %s %q %q %v (the filter must refuse a new user namespace)", i, res.Status, out, res.Stderr.Kept, res.Err)
		}
		if proc.Prestarted() {
			prestarted++
		}
		if n := held() - base; n != 1 {
			t.Errorf("run %d (pre-started %v): %d seccomp listeners held after the command's exit, want 1", i, proc.Prestarted(), n)
		}
		if i%2 == 1 {
			// Nobody says the result was delivered: let go a second after it.
			for deadline := time.Now().Add(5 * time.Second); held() != base && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		} else {
			proc.Delivered()
		}
		if n := held() - base; n != 0 {
			t.Errorf("run %d: %d seccomp listeners left after the result was delivered", i, n)
		}
	}
	if prestarted == 0 {
		t.Error("no execution ran in a pre-started launcher")
	}
}
