package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The binaries are built into a fresh temporary directory per test process
// (about 130 MB), which nothing removes when the process ends: test binaries
// have no exit hook outside TestMain. Left alone, a day of test runs filled
// the disk, and then termd refused executions (storage.min_free_bytes) in
// every test. So each directory names its owner (pid and start time), and a
// new build first removes the directories whose owner is gone.

const ownerFile = ".owner"

// markOwner records this test process as dir's owner.
func markOwner(dir string) {
	_ = os.WriteFile(filepath.Join(dir, ownerFile), []byte(selfIdent()), 0o644)
}

// sweepBinDirs removes earlier build directories whose test process has
// ended; one without an owner file (written by an older harness) goes once it
// is older than any test run may last (make's longest -timeout is 60m).
func sweepBinDirs() {
	if startTicks(os.Getpid()) == "" {
		return // no /proc: owners cannot be told apart
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "termd-bin-*"))
	for _, d := range dirs {
		owner, err := os.ReadFile(filepath.Join(d, ownerFile))
		switch {
		case err == nil:
			if procIdent(strings.Fields(string(owner))) {
				continue
			}
		default:
			st, err := os.Stat(d)
			if err != nil || time.Since(st.ModTime()) < 2*time.Hour {
				continue
			}
		}
		_ = os.RemoveAll(d)
	}
}

func selfIdent() string {
	return fmt.Sprintf("%d %s", os.Getpid(), startTicks(os.Getpid()))
}

// procIdent reports whether the process named by [pid, start ticks] still
// runs (same start time, so a reused pid does not count).
func procIdent(f []string) bool {
	if len(f) != 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	st := startTicks(pid)
	return st != "" && st == f[1]
}

// startTicks is field 22 of /proc/PID/stat ("" where there is none).
func startTicks(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}
