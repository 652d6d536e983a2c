//go:build linux

package vt

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// These tests run real programs on a real pseudo-terminal and read the
// screen the emulator renders from their output.

type ptyProgram struct {
	t    *testing.T
	term *Terminal
	ptmx *os.File
	cmd  *exec.Cmd
	done chan struct{}
}

func startOnPty(t *testing.T, rows, cols int, name string, args ...string) *ptyProgram {
	t.Helper()
	if name == "python3" {
		name = python3()
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("this test needs %s on PATH: %v", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir, "TERM=xterm-256color", "LANG=C.UTF-8",
		"LESSHISTFILE=-", "PYTHONDONTWRITEBYTECODE=1",
	}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
	if err != nil {
		t.Fatalf("start %s on a pty: %v", name, err)
	}
	p := &ptyProgram{t: t, ptmx: ptmx, cmd: cmd, done: make(chan struct{})}
	p.term = New(rows, cols, Options{Reply: func(b []byte) { ptmx.Write(b) }})
	go func() {
		io.Copy(p.term, ptmx) // ends with EIO when the program has exited
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		ptmx.Close()
		<-p.done
	})
	return p
}

func (p *ptyProgram) send(s string) {
	p.t.Helper()
	if _, err := p.ptmx.Write([]byte(s)); err != nil {
		p.t.Fatalf("write %q: %v", s, err)
	}
}

// waitFor polls the screen until ok holds, failing with the screen after a
// deadline; it never sleeps a fixed time before looking.
func (p *ptyProgram) waitFor(what string, ok func(Snapshot) bool) Snapshot {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := p.term.Snapshot()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s; cursor %d,%d, screen:\n%s", what, s.CursorRow, s.CursorCol, s.Text())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitExit waits for the program's output to end (it exited).
func (p *ptyProgram) waitExit() {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.t.Fatalf("program did not exit; screen:\n%s", p.term.Snapshot().Text())
	}
}

func TestPythonREPL(t *testing.T) {
	p := startOnPty(t, 24, 80, "python3", "-i", "-q")
	p.waitFor("the prompt", func(s Snapshot) bool { return s.Text() == ">>>" })
	p.send("1+1\r")
	s := p.waitFor("the answer and a new prompt", func(s Snapshot) bool { return strings.Count(s.Text(), ">>>") == 2 })
	if got := s.Text(); got != ">>> 1+1\n2\n>>>" {
		t.Fatalf("screen %q", got)
	}
	if s.CursorRow != 2 || s.CursorCol != 4 {
		t.Fatalf("cursor at %d,%d, want after the prompt at 2,4", s.CursorRow, s.CursorCol)
	}
	// Line editing: type, move left, insert, and the screen shows the
	// edited line, not the keystrokes.
	p.send("print('ac')\x1b[D\x1b[D\x1b[Db\r")
	s = p.waitFor("the edited line's output", func(s Snapshot) bool { return strings.Count(s.Text(), ">>>") == 3 })
	if got := s.Text(); got != ">>> 1+1\n2\n>>> print('abc')\nabc\n>>>" {
		t.Fatalf("screen %q", got)
	}
}

func TestLess(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "long.txt")
	var b strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&b, "line %03d of the long file\n", i)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startOnPty(t, 24, 80, "sh", "-c", "echo before less; less "+file+"; echo after less")
	s := p.waitFor("less's first page", func(s Snapshot) bool {
		return s.AltScreen && strings.HasPrefix(s.Lines[22], "line 023")
	})
	for i := 0; i < 23; i++ {
		if want := fmt.Sprintf("line %03d of the long file", i+1); s.Lines[i] != want {
			t.Fatalf("row %d %q, want %q", i, s.Lines[i], want)
		}
	}
	if last := s.Lines[23]; last != ":" && !strings.Contains(last, "long.txt") {
		t.Fatalf("prompt line %q, want ':' or the file name", last)
	}
	if !s.AppCursorKeys {
		t.Fatal("less turned on application cursor keys, the snapshot does not say so")
	}
	p.send(" ") // next page
	s = p.waitFor("the second page", func(s Snapshot) bool { return strings.HasPrefix(s.Lines[22], "line 046") })
	if s.Lines[0] != "line 024 of the long file" || s.Lines[23] != ":" {
		t.Fatalf("second page %q ... %q", s.Lines[0], s.Lines[23])
	}
	p.send("q")
	p.waitExit()
	s = p.term.Snapshot()
	if s.AltScreen || s.AppCursorKeys || s.Text() != "before less\nafter less" {
		t.Fatalf("after q: alt %v, application cursor keys %v, screen %q", s.AltScreen, s.AppCursorKeys, s.Text())
	}
	if lines, _ := p.term.Scrollback(0, 0); len(lines) != 0 {
		t.Fatalf("less's pages went to the scrollback: %q", lines)
	}
}

func TestColouredOutput(t *testing.T) {
	p := startOnPty(t, 10, 40, "printf", `\033[1;31mred\033[0m \033[42;30mon green\033[0m \033[38;2;10;20;30mtrue colour\033[m\n\033[4munderlined\033[24m done\n`)
	p.waitExit()
	if got := p.term.Snapshot().Text(); got != "red on green true colour\nunderlined done" {
		t.Fatalf("screen %q", got)
	}
}

func TestLsColor(t *testing.T) {
	p := startOnPty(t, 10, 80, "sh", "-c", "mkdir sub && touch a.txt b.go && chmod +x b.go && ls --color=always")
	p.waitExit()
	if got := p.term.Snapshot().Text(); got != "a.txt  b.go  sub" {
		t.Fatalf("screen %q", got)
	}
}

func TestTopFullScreen(t *testing.T) {
	p := startOnPty(t, 24, 100, "top", "-d", "30")
	s := p.waitFor("top's summary and task header", func(s Snapshot) bool {
		return strings.HasPrefix(s.Lines[0], "top - ") && strings.Contains(s.Text(), "PID USER")
	})
	for i, l := range s.Lines {
		if strings.ContainsAny(l, "\x1b\x0f\x0e") {
			t.Fatalf("row %d holds control characters: %q", i, l)
		}
	}
	if !strings.HasPrefix(s.Lines[1], "Tasks:") {
		t.Fatalf("second row %q, want the task summary", s.Lines[1])
	}
	if !strings.HasPrefix(strings.TrimSpace(s.Lines[6]), "PID USER") {
		t.Fatalf("seventh row %q, want the task header", s.Lines[6])
	}
	p.send("q")
	p.waitExit()
}

func TestProgressBar(t *testing.T) {
	script := `import sys, time
for i in range(0, 101, 20):
    sys.stdout.write("\r[%-10s] %3d%%" % ("#" * (i // 10), i)); sys.stdout.flush()
sys.stdout.write("\ndone\n")`
	p := startOnPty(t, 5, 40, "python3", "-c", script)
	p.waitExit()
	if got := p.term.Snapshot().Text(); got != "[##########] 100%\ndone" {
		t.Fatalf("screen %q", got)
	}
}

// python3 on PATH may be a version manager's shim (a shell script costing
// seconds under load); run the interpreter it resolves to.
var python3 = sync.OnceValue(func() string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if p := strings.TrimSpace(string(out)); err == nil && p != "" {
		return p
	}
	return "python3"
})

func TestVim(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.txt")
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "vim line %d\n", i)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startOnPty(t, 24, 80, "sh", "-c", "echo before vim; vim -u NONE -i NONE -N -n "+file+"; echo after vim")
	// vim writes a screen in several chunks and places the cursor last: each
	// wait holds out for the cursor too, so a snapshot taken mid-redraw is
	// not judged.
	s := p.waitFor("the file in vim, the cursor at its top", func(s Snapshot) bool {
		return s.AltScreen && s.Lines[22] == "vim line 23" && strings.Contains(s.Lines[23], "notes.txt") && s.CursorRow == 0
	})
	if s.Lines[0] != "vim line 1" || s.CursorRow != 0 || s.CursorCol != 0 {
		t.Fatalf("top %q, cursor %d,%d", s.Lines[0], s.CursorRow, s.CursorCol)
	}
	// Jump to the end (vim scrolls), open a line below and type.
	p.send("Go")
	p.waitFor("insert mode at the end", func(s Snapshot) bool {
		return s.Lines[21] == "vim line 100" && strings.Contains(s.Lines[23], "INSERT")
	})
	p.send("hello from the test\x1b")
	s = p.waitFor("the typed line, the cursor back on it", func(s Snapshot) bool {
		return s.Lines[22] == "hello from the test" && !strings.Contains(s.Lines[23], "INSERT") && s.CursorRow == 22
	})
	if s.Lines[0] != "vim line 79" || s.CursorRow != 22 || s.CursorCol != 18 {
		t.Fatalf("top %q, cursor %d,%d", s.Lines[0], s.CursorRow, s.CursorCol)
	}
	// Back to the top: vim redraws the whole screen.
	p.send("gg")
	p.waitFor("the top again", func(s Snapshot) bool { return s.Lines[0] == "vim line 1" && s.Lines[22] == "vim line 23" })
	p.send(":q!\r")
	p.waitExit()
	if s := p.term.Snapshot(); s.AltScreen || s.Text() != "before vim\nafter vim" {
		t.Fatalf("after :q! alt %v, screen %q", s.AltScreen, s.Text())
	}
}
