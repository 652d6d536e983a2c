package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A build directory whose test process ended is removed by the next build;
// one whose owner runs, or an unowned one younger than two hours, stays.
func TestSweepBinDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, owner string, age time.Duration) string {
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}
	mine := mk("termd-bin-1", selfIdent(), 0)
	gone := mk("termd-bin-2", "999999999 1", 0)
	ended := mk("termd-bin-3", "0 0", 0)
	deadOwner := mk("termd-bin-4", itoa(dead.Process.Pid)+" 1", 0)
	oldUnowned := mk("termd-bin-5", "", 3*time.Hour)
	newUnowned := mk("termd-bin-6", "", time.Minute)
	other := mk("not-termd-bin", "", 3*time.Hour)
	sweepBinDirs()
	for d, keep := range map[string]bool{mine: true, gone: false, ended: false, deadOwner: false, oldUnowned: false, newUnowned: true, other: true} {
		_, err := os.Stat(d)
		if exists := err == nil; exists != keep {
			t.Errorf("%s: exists %v, want %v", filepath.Base(d), exists, keep)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
