package ttyready

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func waitOn(t *testing.T, p *ptyProgram, spec Spec) Reason {
	t.Helper()
	if spec.Timeout == 0 {
		spec.Timeout = 20 * time.Second
	}
	r, err := Wait(context.Background(), p, spec)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return r
}

// Send and wait against the real python3 REPL: each wait returns when the
// REPL is back at its prompt, with the answer on the screen.
func TestWaitPythonREPL(t *testing.T) {
	p := start(t, "python3", "-i", "-q")
	spec := Spec{Quiet: 5 * time.Second} // reading must win long before quiet
	if r := waitOn(t, p, spec); r != WaitingForInput || p.Text() != ">>>" {
		t.Fatalf("start: %q, screen %q", r, p.Text())
	}
	p.send("1+1\r")
	if r := waitOn(t, p, spec); r != WaitingForInput || p.Text() != ">>> 1+1\n2\n>>>" {
		t.Fatalf("after 1+1: %q, screen %q", r, p.Text())
	}
	// A block without its closing blank line leaves the REPL asking for
	// more: the screen shows the continuation prompt.
	p.send("for i in range(2):\r")
	if r := waitOn(t, p, spec); r != WaitingForInput || p.Text() != ">>> 1+1\n2\n>>> for i in range(2):\n..." {
		t.Fatalf("continuation: %q, screen %q", r, p.Text())
	}
	p.send("    print(i*7)\r\r")
	if r := waitOn(t, p, spec); r != WaitingForInput || p.Text() != ">>> 1+1\n2\n>>> for i in range(2):\n...     print(i*7)\n...\n0\n7\n>>>" {
		t.Fatalf("block: %q, screen %q", r, p.Text())
	}
	// Work that takes a while is not mistaken for waiting.
	p.send("import time; time.sleep(0.5); print('slept')\r")
	if r := waitOn(t, p, spec); r != WaitingForInput || !strings.HasSuffix(p.Text(), "print('slept')\nslept\n>>>") {
		t.Fatalf("sleep: %q, screen %q", r, p.Text())
	}
}

func TestWaitQuietForASleepingProgram(t *testing.T) {
	p := start(t, "python3", "-c", "import time; print('working', flush=True); time.sleep(30)")
	p.waitText("working")
	if r := waitOn(t, p, Spec{Quiet: 300 * time.Millisecond}); r != Quiet {
		t.Fatalf("reason %q, screen %q", r, p.Text())
	}
}

func TestWaitPatternExitedTimeout(t *testing.T) {
	p := start(t, "sh", "-c", "echo one; sleep 0.2; echo marker-42; exec sleep 30")
	if r := waitOn(t, p, Spec{Pattern: regexp.MustCompile(`marker-\d+`)}); r != Pattern {
		t.Fatalf("pattern: %q, screen %q", r, p.Text())
	}
	p = start(t, "sh", "-c", "echo bye")
	if r := waitOn(t, p, Spec{}); r != Exited {
		t.Fatalf("exit: %q", r)
	}
	p = start(t, "sleep", "30")
	if r := waitOn(t, p, Spec{Timeout: 200 * time.Millisecond}); r != Timeout {
		t.Fatalf("timeout: %q", r)
	}
}

func TestWaitYesNoQuestion(t *testing.T) {
	p := start(t, "sh", "-c", `printf 'Proceed? [Y/n] '; read answer; echo "answer=$answer"; exec sleep 30`)
	if r := waitOn(t, p, Spec{}); r != WaitingForInput || p.Text() != "Proceed? [Y/n]" {
		t.Fatalf("question: %q, screen %q", r, p.Text())
	}
	p.send("y\r")
	if r := waitOn(t, p, Spec{Quiet: 300 * time.Millisecond}); r != Quiet || p.Text() != "Proceed? [Y/n] y\nanswer=y" {
		t.Fatalf("after the answer: %q, screen %q", r, p.Text())
	}
}

// git add -p asks about each hunk; every wait ends at its question.
func TestWaitGitAddPatch(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + repo, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	write := func() {
		if err := os.WriteFile(filepath.Join(repo, "f.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write()
	git("init", "-q")
	git("add", "f.txt")
	git("commit", "-qm", "first")
	lines[1], lines[27] = "line 2 changed", "line 28 changed"
	write()

	p := start(t, "sh", "-c", "cd "+repo+" && HOME="+repo+" GIT_CONFIG_NOSYSTEM=1 exec git add -p")
	if r := waitOn(t, p, Spec{}); r != WaitingForInput || !strings.Contains(p.Text(), "+line 2 changed") ||
		!strings.Contains(p.Text(), "(1/2) Stage this hunk") {
		t.Fatalf("first hunk: %q, screen:\n%s", r, p.Text())
	}
	p.send("y\r")
	if r := waitOn(t, p, Spec{}); r != WaitingForInput || !strings.Contains(p.Text(), "+line 28 changed") ||
		!strings.Contains(p.Text(), "(2/2) Stage this hunk") {
		t.Fatalf("second hunk: %q, screen:\n%s", r, p.Text())
	}
	p.send("n\r")
	if r := waitOn(t, p, Spec{}); r != Exited {
		t.Fatalf("after the last hunk: %q, screen:\n%s", r, p.Text())
	}
	staged := git("diff", "--cached")
	if !strings.Contains(staged, "+line 2 changed") || strings.Contains(staged, "line 28 changed") {
		t.Fatalf("index after y, n:\n%s", staged)
	}
}
