package ttyready

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/termd/termd/internal/vt"
)

// ptyProgram is a real program on a real pseudo-terminal, its output
// rendered by the vt emulator. It is also the Source of the Wait tests.
type ptyProgram struct {
	t      *testing.T
	ptmx   *os.File
	cmd    *exec.Cmd
	term   *vt.Terminal
	seq    atomic.Uint64
	done   chan struct{} // the program exited
	copied chan struct{} // its output is all read
}

func start(t *testing.T, name string, args ...string) *ptyProgram {
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
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir, "TERM=xterm-256color", "LANG=C.UTF-8", "LESSHISTFILE=-"}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatalf("start %s on a pty: %v", name, err)
	}
	p := &ptyProgram{t: t, ptmx: ptmx, cmd: cmd, done: make(chan struct{}), copied: make(chan struct{})}
	p.term = vt.New(24, 80, vt.Options{Reply: func(b []byte) { ptmx.Write(b) }})
	go func() {
		io.Copy(p, ptmx)
		close(p.copied)
	}()
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		// The whole process group (the program leads its own session):
		// a child left holding the terminal (sh's cat) would keep the read
		// of the master below from ever ending, and SIGHUP does not end it
		// when the test runs with SIGHUP ignored (under nohup).
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Process.Kill()
		<-p.done
		ptmx.Close()
		select {
		case <-p.copied:
		case <-time.After(20 * time.Second):
			// A blocking read of the master ends only when no process
			// holds the terminal: say so rather than hang the package.
			t.Errorf("%s: the terminal's output never ended 20 s after the program was killed (a process outside its group still holds the terminal)", name)
		}
	})
	return p
}

func (p *ptyProgram) Write(b []byte) (int, error) {
	p.term.Write(b)
	p.seq.Add(1)
	return len(b), nil
}

func (p *ptyProgram) Reading() bool {
	r, _, err := ForegroundReading(p.ptmx)
	if err != nil {
		p.t.Errorf("probe: %v", err)
	}
	return r
}
func (p *ptyProgram) OutputSeq() uint64     { return p.seq.Load() }
func (p *ptyProgram) Text() string          { return p.term.Snapshot().Text() }
func (p *ptyProgram) Done() <-chan struct{} { return p.done }

func (p *ptyProgram) send(s string) {
	p.t.Helper()
	if _, err := p.ptmx.Write([]byte(s)); err != nil {
		p.t.Fatalf("write %q: %v", s, err)
	}
}

// waitText polls the screen until it contains s.
func (p *ptyProgram) waitText(s string) {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(p.Text(), s) {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %q; screen:\n%s", s, p.Text())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitReading polls the probe until it reports reading, and returns the pid
// that showed it.
func (p *ptyProgram) waitReading() int {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, pid, err := ForegroundReading(p.ptmx)
		if err != nil {
			p.t.Fatalf("probe: %v", err)
		}
		if r {
			return pid
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the probe never saw the program reading; screen:\n%s", p.Text())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// neverReading samples the probe for a while: it must never say reading.
func (p *ptyProgram) neverReading() {
	p.t.Helper()
	end := time.Now().Add(400 * time.Millisecond)
	for n := 0; time.Now().Before(end) || n < 20; n++ {
		r, pid, err := ForegroundReading(p.ptmx)
		if err != nil {
			p.t.Fatalf("probe: %v", err)
		}
		if r {
			p.t.Fatalf("the probe says process %d is reading the terminal; screen:\n%s", pid, p.Text())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-p.done:
		p.t.Fatalf("the program exited, so the samples prove nothing; screen:\n%s", p.Text())
	default:
	}
}

func TestProbeReading(t *testing.T) {
	cases := []struct {
		name  string
		argv  []string
		ready string // on the screen once the program waits
	}{
		{"python3 REPL (readline select)", []string{"python3", "-i", "-q"}, ">>>"},
		{"sh read", []string{"sh", "-c", "echo asking; read x"}, "asking"},
		{"cat", []string{"cat"}, ""},
		{"select on stdin", []string{"python3", "-c", "import select,sys,os; r,w=os.pipe(); print('ready', flush=True); select.select([r, sys.stdin], [], [])"}, "ready"},
		{"poll on stdin", []string{"python3", "-c", "import select,sys; p=select.poll(); p.register(sys.stdin, select.POLLIN); print('ready', flush=True); p.poll()"}, "ready"},
		{"epoll on stdin", []string{"python3", "-c", "import select,sys; e=select.epoll(); e.register(sys.stdin, select.EPOLLIN); print('ready', flush=True); e.poll()"}, "ready"},
		{"read of /dev/tty", []string{"python3", "-c", "import os; f=os.open('/dev/tty', os.O_RDONLY); print('ready', flush=True); os.read(f, 1)"}, "ready"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, c.argv[0], c.argv[1:]...)
			p.waitText(c.ready)
			if pid := p.waitReading(); pid != p.cmd.Process.Pid {
				t.Fatalf("reported pid %d, want the program %d", pid, p.cmd.Process.Pid)
			}
		})
	}
}

func TestProbeNotReading(t *testing.T) {
	cases := []struct {
		name  string
		argv  []string
		ready string
	}{
		{"sleep", []string{"sh", "-c", "echo ready; exec sleep 30"}, "ready"},
		{"python3 time.sleep", []string{"python3", "-c", "import time; print('ready', flush=True); time.sleep(30)"}, "ready"},
		{"read of a pipe", []string{"python3", "-c", "import os; r,w=os.pipe(); print('ready', flush=True); os.read(r, 1)"}, "ready"},
		{"select on a pipe", []string{"python3", "-c", "import select,os; r,w=os.pipe(); print('ready', flush=True); select.select([r], [], [])"}, "ready"},
		{"poll of stdin without POLLIN", []string{"python3", "-c", "import select,os,sys; r,w=os.pipe(); p=select.poll(); p.register(r, select.POLLIN); p.register(sys.stdin, 0); print('ready', flush=True); p.poll()"}, "ready"},
		{"epoll on a pipe", []string{"python3", "-c", "import select,os; r,w=os.pipe(); e=select.epoll(); e.register(r, select.EPOLLIN); print('ready', flush=True); e.poll()"}, "ready"},
		{"busy loop", []string{"python3", "-c", "print('ready', flush=True)\nwhile True: pass"}, "ready"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, c.argv[0], c.argv[1:]...)
			p.waitText(c.ready)
			p.neverReading()
		})
	}
}

func TestProbeLess(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 200; i++ {
		b.WriteString("a line of the file\n")
	}
	file := dir + "/long.txt"
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, "less", file)
	p.waitText("a line of the file")
	p.waitReading()
}

// A group member other than the leader: sh waits for cat, cat reads.
func TestProbeGroupMember(t *testing.T) {
	p := start(t, "sh", "-c", "echo ready; cat; echo done")
	p.waitText("ready")
	pid := p.waitReading()
	if pid == p.cmd.Process.Pid {
		t.Fatalf("reported the shell %d, which waits for cat rather than reading", pid)
	}
	comm, _ := os.ReadFile("/proc/" + itoa(pid) + "/comm")
	if strings.TrimSpace(string(comm)) != "cat" {
		t.Fatalf("reported process %d (%q), want cat", pid, comm)
	}
}

func TestProbeAfterExit(t *testing.T) {
	p := start(t, "sh", "-c", "read x; echo got $x")
	p.waitReading()
	p.send("bye\r")
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("sh did not exit")
	}
	r, pid, err := ForegroundReading(p.ptmx)
	if r {
		t.Fatalf("reading after exit (pid %d)", pid)
	}
	t.Logf("after exit: reading=%v pid=%d err=%v", r, pid, err)
	p.ptmx.Close()
	if _, _, err := ForegroundReading(p.ptmx); err == nil {
		t.Fatal("no error for a closed master")
	}
	if _, _, err := ForegroundReading(nil); err == nil {
		t.Fatal("no error for a nil master")
	}
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := ForegroundReading(f); err == nil || !strings.Contains(err.Error(), "foreground process group") {
		t.Fatalf("not a terminal: err %v", err)
	}
}

// The probe must stay cheap: it runs every 15 ms for each waiting terminal.
func BenchmarkProbe(b *testing.B) {
	cmd := exec.Command("sleep", "30")
	ptmx, err := pty.Start(cmd)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait(); ptmx.Close() }()
	var once sync.Once
	for b.Loop() {
		if _, _, err := ForegroundReading(ptmx); err != nil {
			once.Do(func() { b.Fatal(err) })
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// python3 on PATH may be a version manager's shim (a shell script costing
// seconds under load); run the interpreter it resolves to.
var python3 = sync.OnceValue(func() string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if p := strings.TrimSpace(string(out)); err == nil && p != "" {
		return p
	}
	return "python3"
})
