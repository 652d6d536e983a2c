package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/internal/program"
)

// The launcher opens each masked path and then mounts its cover over what it
// opened. A process outside the launch (another execution of the agent's,
// the user, termd itself) may exchange names in between. A cover follows the
// object it was mounted on, wherever that object is renamed to, so what must
// hold is that every object at a masked path when the launcher is done
// carries its own cover. Here two hidden paths are exchanged without pause
// (the paths themselves, their parents, or one with a link to the other)
// while the launcher covers them: before the launcher checked its covers,
// both could land on the same object (the path opened first was exchanged
// with the second before the second was opened) and the other secret was
// left in the clear. Every launch must fail with a message naming a masked
// path, or run a command that reads no secret at any name.
func TestLauncherMasksSurviveRenameExchange(t *testing.T) {
	host(t)
	if os.Geteuid() != 0 {
		t.Skip("a private mount namespace made by the launcher itself needs root")
	}
	for _, tc := range []struct {
		name          string
		file, parents bool
		link          bool
	}{
		{name: "directories"},
		{name: "files", file: true},
		{name: "parent directories", parents: true},
		{name: "files in exchanged parents", file: true, parents: true},
		{name: "directory and a link to the other", link: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			a, b := filepath.Join(base, "a", "s"), filepath.Join(base, "b", "s")
			names := []string{a, b}
			for i, p := range names {
				secret := "SECRET-" + string(rune('A'+i))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				if tc.file {
					err = os.WriteFile(p, []byte(secret+"\n"), 0o644)
				} else if err = os.Mkdir(p, 0o755); err == nil {
					err = os.WriteFile(filepath.Join(p, "f"), []byte(secret+"\n"), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			x, y := a, b
			if tc.parents {
				x, y = filepath.Dir(a), filepath.Dir(b)
			}
			if tc.link {
				// A link at another name, pointing at the second path:
				// exchanged with the first, the first is a link for a while.
				y = filepath.Join(base, "link")
				if err := os.Symlink(b, y); err != nil {
					t.Fatal(err)
				}
				names = append(names, y)
			}
			read := "cat"
			for _, p := range names {
				if tc.file {
					read += " " + p
				} else {
					read += " " + p + "/f"
				}
			}
			cfg := kvs("mountns", "1", "hide", a, "hide", b, "path", "/bin/sh", "arg", "sh", "arg", "-c", "arg", read+" 2>&1; echo ran")
			var stop atomic.Bool
			var swaps atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					if unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, y, unix.RENAME_EXCHANGE) == nil {
						swaps.Add(1)
					}
				}
			}()
			ran, refusals := 0, map[string]int{}
			for i := 0; i < 60; i++ {
				report, out := rawLaunch(t, base, "", cfg)
				switch {
				case strings.Contains(out, "SECRET"):
					t.Errorf("launch %d: the command read a masked secret (launcher reported %q): %q", i, report, out)
				case report == "" && strings.Contains(out, "ran"):
					ran++
				case strings.HasPrefix(report, "sandbox: ") && (strings.Contains(report, a) || strings.Contains(report, b)):
					r := strings.NewReplacer(a, "<a>", b, "<b>").Replace(report)
					refusals[r[:min(len(r), 70)]]++
				default:
					t.Errorf("launch %d: neither ran nor refused naming a masked path: reported %q, printed %q", i, report, out)
				}
			}
			stop.Store(true)
			wg.Wait()
			t.Logf("%d swaps; %d launches ran with both covers; refused: %v", swaps.Load(), ran, refusals)
			if swaps.Load() == 0 || ran == 0 {
				t.Fatalf("the race was not run: %d swaps, %d launches ran", swaps.Load(), ran)
			}
		})
	}
}

// A protected path below a directory the command may write (.git/hooks
// below .git) is covered where it is, and the cover follows it if .git is
// renamed; but the next execution's plan finds no .git/hooks to protect.
// Two executions planted a hook that way: the first renamed .git, the
// second wrote .git2/hooks and renamed it back. The directory between the
// workspace and the protected path is pinned (bound onto itself), so that
// renaming it is refused in the command's mount namespace.
func TestMountPinsTheParentOfProtectedPaths(t *testing.T) {
	f := newFixture(t)
	if os.Geteuid() != 0 {
		t.Skip("protected paths are bound read-only in a mount namespace termd makes as root")
	}
	sh := func(script string) string {
		t.Helper()
		p := workspaceWrite
		p.Exec = program.Exec("/bin/sh")
		l, _, err := sandbox.Prepare(p, f.paths, sandbox.Required, f.sup)
		if err != nil {
			t.Fatal(err)
		}
		proc, err := f.run.Start(runner.Spec{Path: "/bin/sh", Argv: []string{"sh", "-c", "{ " + script + "; } 2>&1"}, Dir: f.ws, Timeout: 20 * time.Second, Launch: l})
		if err != nil {
			t.Fatal(err)
		}
		res := proc.Wait()
		if res.Err != nil {
			t.Fatalf("%s: %v", script, res.Err)
		}
		return strings.TrimSpace(string(res.Stdout.Kept))
	}
	hook := filepath.Join(f.ws, ".git", "hooks", "pre-commit")
	out1 := sh("echo evil > .git/hooks/pre-commit; mv .git .git2 && echo renamed")
	out2 := sh("echo evil > .git2/hooks/pre-commit && mv .git2 .git && echo planted")
	if _, err := os.Stat(hook); err == nil || strings.Contains(out1, "renamed") {
		t.Fatalf("a hook was planted in the protected .git/hooks (first execution printed %q, second %q)", out1, out2)
	}
	if !strings.Contains(out1, "Read-only file system") || !strings.Contains(out1, "busy") {
		t.Fatalf("the first execution printed %q; want the write refused read-only and the rename refused busy", out1)
	}
	// git itself still works in the pinned .git.
	if out := sh("git init -q --template= . && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m m && git log --format=%s"); out != "m" {
		t.Fatalf("git in a pinned .git: %q", out)
	}
}
