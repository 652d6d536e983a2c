package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
// is one of them, renamed to its name, private and its user's, out of the
// spares while it runs.
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

// runSh runs script with sh as the agent (approved by the operator when the
// policy asks) and fails the test unless it succeeded.
func (r *rig) runSh(t *testing.T, sid, script string) {
	t.Helper()
	file := filepath.Join(r.ws, "script.sh")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	p := r.plan(t, agent, sid, "sh", file)
	if p.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		if _, err := r.ApprovePlan(context.Background(), operator, p.Id, p.Decision.GetRequestHash()); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := r.run(t, agent, p); err != nil || st != termdv1.PlanState_PLAN_STATE_SUCCEEDED {
		t.Fatalf("sh %q: %v %v", script, st, err)
	}
}

// An ended execution's TMPDIR serves its user's next execution, but never
// with anything the command left in it: files, directories, a symbolic link
// (whose target stays), a FIFO.
func TestTmpDirRecycledEmpty(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the TMPDIR is given to the agent's uid: needs root")
	}
	r := newRig(t)
	sid := r.session(t, agent)
	target := filepath.Join(r.ws, "target")
	if err := os.WriteFile(target, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.runSh(t, sid, `cd "$TMPDIR" && echo secret >f && mkdir -p d/e && echo x >d/e/g && ln -s `+target+` link && mkfifo fifo && chmod 000 d && stat -c %i . >`+r.ws+`/ino1`)
	r.runSh(t, sid, `ls -A "$TMPDIR" >`+r.ws+`/ls2 && stat -c '%i %a %u' "$TMPDIR" >`+r.ws+`/st2`)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(r.ws, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if ls := read("ls2"); ls != "" {
		t.Errorf("the next execution's TMPDIR holds %q", ls)
	}
	if want := read("ino1") + " 700 65534"; read("st2") != want {
		t.Errorf("the next TMPDIR: inode, mode, owner %q, want %q (the first one's, recycled)", read("st2"), want)
	}
	if read("target") != "kept" {
		t.Errorf("the link's target was touched")
	}
}

// A TMPDIR its command changed (mode, set-id bit, owner, an ACL or another
// extended attribute), or whose execution's processes are not known gone,
// is removed, never recycled; a recycled one is root's 0700, empty, and
// only for its own user.
func TestTmpDirRecycleRefusals(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const uid, gid = 65534, 65534
	// A default ACL granting nobody's group nothing special: user::rwx group::--- other::---.
	acl := []byte{2, 0, 0, 0, 1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	for _, c := range []struct {
		name      string
		change    func(dir string) error
		contained bool
	}{
		{"plain, contained", func(string) error { return nil }, true},
		{"plain, processes not known gone", func(string) error { return nil }, false},
		{"mode 0777", func(d string) error { return os.Chmod(d, 0o777) }, true},
		{"setgid", func(d string) error { return os.Chmod(d, os.ModeSetgid|0o700) }, true},
		{"sticky", func(d string) error { return os.Chmod(d, os.ModeSticky|0o700) }, true},
		{"other owner", func(d string) error { return os.Lchown(d, uid, 0) }, true},
		{"user xattr", func(d string) error { return syscall.Setxattr(d, "user.x", []byte("1"), 0) }, true},
		{"default ACL", func(d string) error { return syscall.Setxattr(d, "system.posix_acl_default", acl, 0) }, true},
		{"a symbolic link", func(d string) error {
			if err := os.RemoveAll(d); err != nil {
				return err
			}
			return os.Symlink("/tmp", d)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			base := filepath.Join(r.homeBase(), ".tmp")
			if _, err := r.homeFor(uid, gid); err != nil {
				t.Fatal(err)
			}
			dir, err := r.privateTmp("x1", uid, gid)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "f"), []byte("left"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := c.change(dir); err != nil {
				t.Skipf("cannot make it: %v", err)
			}
			r.releaseTmp(dir, uid, gid, c.contained)
			if _, err := os.Lstat(dir); !os.IsNotExist(err) {
				t.Errorf("the execution's TMPDIR is still there (%v)", err)
			}
			spares := spareInodes(t, base)
			if c.name != "plain, contained" {
				if len(spares) != 0 {
					t.Errorf("recycled into %v", spares)
				}
				return
			}
			if len(spares) != 1 {
				t.Fatalf("spares %v, want the recycled one", spares)
			}
			for _, name := range spares {
				sp := filepath.Join(base, name)
				st, _ := os.Lstat(sp)
				if sys := st.Sys().(*syscall.Stat_t); st.Mode() != os.ModeDir|0o700 || sys.Uid != 0 || sys.Gid != 0 {
					t.Errorf("recycled spare: mode %v owner %d:%d, want root's 0700", st.Mode(), sys.Uid, sys.Gid)
				}
				if ents, _ := os.ReadDir(sp); len(ents) != 0 {
					t.Errorf("recycled spare holds %v", ents)
				}
			}
			if got := r.tmpSpares.take(uid + 1); got != "" {
				t.Errorf("another user's execution took %s", got)
			}
			if got := r.tmpSpares.take(uid); got == "" {
				t.Errorf("its user's next execution did not get it")
			}
		})
	}
}

// TestBenchTmpDir prints the CPU (this thread's, user+system) an
// execution's TMPDIR costs termd from its making to its end: taken from the
// spares, given to its user, then removed with a spare made in its place
// (contained false: as before recycling) or emptied back into the spares
// (recycled), in alternating rounds. Run with TERMD_BENCH=1.
func TestBenchTmpDir(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1")
	}
	if os.Geteuid() != 0 {
		t.Skip("the TMPDIR is given to another uid: needs root")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const uid, gid = 65534, 65534
	threadCPU := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	n := 0
	cycle := func(r *rig, contained bool) {
		n++
		dir, err := r.privateTmp(fmt.Sprintf("x%d", n), uid, gid)
		if err != nil {
			t.Fatal(err)
		}
		r.releaseTmp(dir, uid, gid, contained)
		r.refillTmp()
	}
	arms := []struct {
		name      string
		contained bool
		r         *rig
		cpu       time.Duration
	}{{name: "removed", contained: false}, {name: "recycled", contained: true}}
	for i := range arms {
		arms[i].r = newRig(t)
		if _, err := arms[i].r.homeFor(uid, gid); err != nil {
			t.Fatal(err)
		}
		for range 50 { // warm up, spares made
			cycle(arms[i].r, arms[i].contained)
		}
	}
	const rounds, per = 20, 100
	for range rounds {
		for i := range arms {
			c0 := threadCPU()
			for range per {
				cycle(arms[i].r, arms[i].contained)
			}
			arms[i].cpu += threadCPU() - c0
		}
	}
	per0 := arms[0].cpu / (rounds * per)
	per1 := arms[1].cpu / (rounds * per)
	fmt.Printf("BENCH tmpdir: CPU per execution's TMPDIR (take, chown, end, refill), %d alternating rounds of %d: recycled %v vs removed and made again %v: ratio %.2fx\n",
		rounds, per, per1, per0, float64(per1)/float64(per0))
}
