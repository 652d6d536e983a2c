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

	"github.com/termd/termd/daemon/broker/hostfs"
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
		if !strings.HasPrefix(ent.Name(), hostfs.SpareTag) {
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
	base := filepath.Join(r.fs.Base(), ".tmp")
	var spares map[uint64]string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if spares = spareInodes(t, base); len(spares) == hostfs.TmpSpareCount {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d TMPDIRs made ahead after an execution (%v), want %d", len(spares), spares, hostfs.TmpSpareCount)
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
	if left := spareInodes(t, base); len(left) != hostfs.TmpSpareCount-1 || left[sys.Ino] != "" {
		t.Errorf("spares while it runs: %v, want the %d others", left, hostfs.TmpSpareCount-1)
	}
	if _, err := r.CancelExecution(ctx, agent, ex.Id); err != nil {
		t.Fatal(err)
	}

	// A dead termd's spare goes at start; a live process's stays.
	dead := exec1(t)
	gone := filepath.Join(base, hostfs.SpareTag+strconv.Itoa(dead)+"-1")
	live := filepath.Join(base, hostfs.SpareTag+"1-1") // pid 1 is alive
	for _, d := range []string{gone, live} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r.fs.RemoveStaleSpares()
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
