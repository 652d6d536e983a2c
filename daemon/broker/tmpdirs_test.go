package broker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// spareInodes lists the spare TMPDIRs in base by inode.
func spareInodes(t *testing.T, base string) map[uint64]string {
	t.Helper()
	ents, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]string{}
	for _, ent := range ents {
		if !strings.HasPrefix(ent.Name(), spareTag) {
			continue
		}
		st, err := os.Lstat(filepath.Join(base, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[st.Sys().(*syscall.Stat_t).Ino] = ent.Name()
	}
	return out
}

// After an execution, TMPDIRs are made ahead; the next execution's TMPDIR
// is one of them, renamed to its name, private and its user's, used once.
// Spares of a termd that is gone are removed at start; a live one's stay.
func TestTmpDirMadeAhead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the TMPDIR is given to the agent's uid: needs root")
	}
	r := newRig(t)
	ctx := context.Background()
	sid := r.session(t, agent)
	if st, err := r.run(t, agent, r.plan(t, agent, sid, "true")); err != nil || st != termdv1.PlanState_PLAN_STATE_SUCCEEDED {
		t.Fatalf("true: %v %v", st, err)
	}
	base := filepath.Join(r.homeBase(), ".tmp")
	var spares map[uint64]string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if spares = spareInodes(t, base); len(spares) == tmpSpareCount {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d TMPDIRs made ahead after an execution (%v), want %d", len(spares), spares, tmpSpareCount)
		}
	}
	for _, name := range spares {
		st, _ := os.Lstat(filepath.Join(base, name))
		if st.Mode() != os.ModeDir|0o700 || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
			t.Errorf("spare %s: mode %v owner %d, want a 0700 directory of termd's", name, st.Mode(), st.Sys().(*syscall.Stat_t).Uid)
		}
	}

	long := r.plan(t, agent, sid, "sleep", "30")
	ex, err := r.Execute(ctx, agent, long.Id, sid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(filepath.Join(base, ex.Id))
	if err != nil {
		t.Fatalf("the running execution's TMPDIR: %v", err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if _, ok := spares[sys.Ino]; !ok {
		t.Errorf("TMPDIR %s (inode %d) is not one of the directories made ahead %v", ex.Id, sys.Ino, spares)
	}
	if st.Mode() != os.ModeDir|0o700 || sys.Uid != agent.Uid || sys.Gid != agent.Gid {
		t.Errorf("TMPDIR: mode %v owner %d:%d, want a 0700 directory of %d:%d", st.Mode(), sys.Uid, sys.Gid, agent.Uid, agent.Gid)
	}
	if left := spareInodes(t, base); len(left) != tmpSpareCount-1 || left[sys.Ino] != "" {
		t.Errorf("spares while it runs: %v, want the %d others", left, tmpSpareCount-1)
	}
	if _, err := r.CancelExecution(ctx, agent, ex.Id); err != nil {
		t.Fatal(err)
	}

	// A dead termd's spare goes at start; a live process's stays.
	dead := exec1(t)
	gone := filepath.Join(base, spareTag+strconv.Itoa(dead)+"-1")
	live := filepath.Join(base, spareTag+"1-1") // pid 1 is alive
	for _, d := range []string{gone, live} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r.removeStaleSpares()
	if _, err := os.Lstat(gone); !os.IsNotExist(err) {
		t.Errorf("a gone termd's spare is still there (%v)", err)
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("a live termd's spare was removed: %v", err)
	}
	_ = os.Remove(live)
}

// exec1 is the pid of a process that has ended.
func exec1(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = p.Wait()
	return p.Pid
}

// ctimeOf is a file's inode change time.
func ctimeOf(t *testing.T, path string) syscall.Timespec {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ctim
}

// HOME and its base get their mode and owner at every start, but are
// written only when they differ: an unchanged one keeps its inode as it was.
func TestHomeWrittenOnlyWhenWrong(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("HOME is given to another uid: needs root")
	}
	r := newRig(t)
	uid, gid := int(agent.Uid), int(agent.Gid)
	home, err := r.homeFor(uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Dir(home)
	before := [2]syscall.Timespec{ctimeOf(t, base), ctimeOf(t, home)}
	time.Sleep(20 * time.Millisecond) // past the file system's clock granularity
	if _, err := r.homeFor(uid, gid); err != nil {
		t.Fatal(err)
	}
	if after := [2]syscall.Timespec{ctimeOf(t, base), ctimeOf(t, home)}; after != before {
		t.Errorf("an unchanged HOME and base were written again: ctimes %v, then %v", before, after)
	}
	// Wrong ones are put right.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(home, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.homeFor(uid, gid); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(base); st.Mode().Perm() != 0o711 {
		t.Errorf("base mode %v, want 0711", st.Mode())
	}
	if st, _ := os.Lstat(home); st.Sys().(*syscall.Stat_t).Uid != agent.Uid || st.Sys().(*syscall.Stat_t).Gid != agent.Gid {
		t.Errorf("HOME owner %d:%d, want %d:%d", st.Sys().(*syscall.Stat_t).Uid, st.Sys().(*syscall.Stat_t).Gid, agent.Uid, agent.Gid)
	}
}
