//go:build !linux

package sandbox

import (
	"os"
	"runtime"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/sandbox/launcher"
)

const sandboxExec = "/usr/bin/sandbox-exec"

// Probe says what this host can enforce: Seatbelt through sandbox-exec on
// macOS, nothing elsewhere.
func Probe(string) Support {
	if runtime.GOOS != "darwin" {
		return Support{}
	}
	s := Support{Platform: "macos-seatbelt", Launcher: sandboxExec}
	if _, err := os.Stat(sandboxExec); err != nil {
		s.LauncherErr = "sandbox-exec was not found at " + sandboxExec
	}
	return s
}

// DefaultLauncher is sandbox-exec on macOS.
func DefaultLauncher() string { return sandboxExec }

// Prepare renders the profile as a Seatbelt policy run by sandbox-exec.
func Prepare(p domain.Profile, paths Paths, mode Mode, sup Support) (*launcher.Launch, Record, error) {
	rec, done, err := begin(p, mode, sup)
	if done || err != nil {
		return nil, rec, err
	}
	if m := sup.Missing(); len(m) > 0 {
		if mode == Required {
			return nil, rec, &RefusedError{Missing: m}
		}
		rec.Level, rec.Missing = LevelNone, m
		return nil, rec, nil
	}
	rec.Level = LevelFull
	return &launcher.Launch{Path: sandboxExec, Prefix: []string{"-p", SeatbeltProfile(p, paths)}}, rec, nil
}

// CheckRootMap: only Linux has user namespaces to map root with.
func CheckRootMap(string, uint32, []string) error {
	return &RootMapError{Why: "this operating system has no user namespaces"}
}

// RefusedError is a refusal because the host cannot enforce a profile.
type RefusedError struct{ Missing []string }

func (e *RefusedError) Error() string { return refusedText(e.Missing) }
