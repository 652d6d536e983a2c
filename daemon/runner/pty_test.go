//go:build linux

package runner

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/runner/proctree"
)

// waitOutput waits (on output callbacks, not a sleep) until stdout contains want.
type outWatch struct {
	ch  chan []byte
	buf bytes.Buffer
}

func newOutWatch(s *Spec) *outWatch {
	w := &outWatch{ch: make(chan []byte, 1024)}
	s.OnOutput = func(_ Stream, _ int64, b []byte) { w.ch <- append([]byte(nil), b...) }
	return w
}

func (w *outWatch) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(w.buf.String(), want) {
		select {
		case b := <-w.ch:
			w.buf.Write(b)
		case <-deadline:
			t.Fatalf("no %q in the terminal's output: %q", want, w.buf.String())
		}
	}
}

func TestTerminalEchoSignalAndEOF(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			// The leader handles SIGINT itself; its foreground child does not.
			s := sh(`trap 'echo caught' INT; echo ready; read line; echo "got:$line"; sleep 100; echo after; read x; echo "tty:$(tty)"`)
			s.TTY = &TTY{Rows: 30, Cols: 100}
			w := newOutWatch(&s)
			p := start(t, r, s)
			w.waitFor(t, "ready")
			if err := p.WriteTerminal([]byte("hello\r")); err != nil {
				t.Fatal(err)
			}
			w.waitFor(t, "got:hello")
			waitChildSleeping(t, p.Pid())
			if err := p.WriteTerminal([]byte{0x03}); err != nil { // Ctrl-C
				t.Fatal(err)
			}
			w.waitFor(t, "after")
			if err := p.WriteTerminal([]byte("x\r")); err != nil {
				t.Fatal(err)
			}
			res := p.Wait()
			if res.Status != StatusSucceeded {
				t.Fatalf("status %s (%v), output %q", res.Status, res.Err, w.buf.String())
			}
			out := string(res.Stdout.Kept)
			if !strings.Contains(out, "caught") || !strings.Contains(out, "tty:/dev/pts/") {
				t.Fatalf("output %q: want the trap's caught and a /dev/pts terminal", out)
			}
			if res.Stderr.Total != 0 {
				t.Fatalf("a terminal is one stream, stderr has %d bytes", res.Stderr.Total)
			}
			if p.WriteTerminal([]byte("late")) == nil {
				t.Fatal("writing to an ended terminal succeeded")
			}
		})
	}
}

func TestTerminalResizeAndIdle(t *testing.T) {
	r := newRunner(t, Options{NoCgroups: true})
	s := sh(`trap 'echo "size:$(stty size)"' WINCH; echo ready; while :; do sleep 0.05; done`)
	s.TTY = &TTY{Rows: 24, Cols: 80, Idle: 700 * time.Millisecond}
	w := newOutWatch(&s)
	p := start(t, r, s)
	w.waitFor(t, "ready")
	if err := p.ResizeTerminal(40, 120); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, "size:40 120")
	res := p.Wait()
	if res.Status != StatusTimedOut || !res.IdleTimedOut {
		t.Fatalf("status %s idle %v: want timed_out by the idle limit", res.Status, res.IdleTimedOut)
	}
}

// waitChildSleeping waits until a process other than the leader runs in the
// leader's session and sleeps (the foreground sleep), so a Ctrl-C reaches it.
func waitChildSleeping(t *testing.T, leader int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for pid, pi := range proctree.Snapshot() {
			if pi.Sid == leader && pid != leader && pi.State == 'S' {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the foreground child never started")
}
