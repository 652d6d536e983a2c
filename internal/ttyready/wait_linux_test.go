package ttyready

import (
	"context"
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
