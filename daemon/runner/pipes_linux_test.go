package runner

import (
	"testing"

	"golang.org/x/sys/unix"
)

// An execution's output pipes stay in non-blocking mode, read through Go's
// poller: a blocking read holds a thread and its P in the kernel while the
// command runs, and Go's sysmon then wakes every 20 µs beside it.
func TestOutputPipesAreNonBlocking(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			r := newRunner(t, m.opts)
			p := start(t, r, sh("echo up; exec sleep 30"))
			if got := firstLine(t, p); got != "up" {
				t.Fatalf("first line %q", got)
			}
			for i, f := range p.pipes {
				raw, err := f.SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				var flags int
				_ = raw.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
				if err != nil || flags&unix.O_NONBLOCK == 0 {
					t.Errorf("output pipe %d: flags %#x (%v), want O_NONBLOCK", i, flags, err)
				}
			}
			_ = p.Cancel()
			p.Wait()
		})
	}
}
