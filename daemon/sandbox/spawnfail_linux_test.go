package sandbox_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/internal/program"
)

// An inline launcher whose release fails after the fork (the intent could
// not be recorded) leaves no descriptor behind: the pidfd the fork gave the
// runner is closed with the rest, however many such failures there are.
func TestInlineSpawnFailureClosesItsPidfd(t *testing.T) {
	f := newFixture(t)
	f.run.Close()
	r, err := runner.NewWithOptions(runner.Options{NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ww := workspaceWrite
	ww.Exec = program.Exec(f.probe)
	refused := errors.New("the intent could not be recorded")
	fail := func(i int) {
		t.Helper()
		l, _, err := sandbox.Prepare(ww, f.paths, sandbox.Required, f.sup)
		if err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(f.ws, fmt.Sprintf("refused-%d", i))
		proc, err := r.Start(runner.Spec{Path: f.probe, Argv: []string{f.probe, "write", marker}, Dir: f.ws, Timeout: 20 * time.Second,
			NoNetwork: true, Launch: l, BeforeRelease: func() error { return refused }})
		if err != nil {
			t.Fatal(err)
		}
		if res := proc.Wait(); !errors.Is(res.Err, refused) {
			t.Fatalf("run %d: %+v, want the release's error", i, res)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the command ran although its release failed")
		}
	}
	fail(0)
	before := pidfds(t)
	const n = 10
	for i := 1; i <= n; i++ {
		fail(i)
	}
	if after := pidfds(t); after > before {
		t.Fatalf("%d failed inline spawns left %d more pidfds open (%d before, %d after)", n, after-before, before, after)
	}
}

// pidfds counts this process's open pidfds.
func pidfds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}
