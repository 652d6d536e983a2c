package runner

import (
	"os"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openTerminal makes the pseudo-terminal of a PTY execution: the slave is
// the command's stdin, stdout and stderr and its controlling terminal (its
// own session: setsid, TIOCSCTTY on descriptor 0), the master is read as its
// one output stream. The caller closes the slave once the child has it.
func (p *Process) openTerminal(sys *syscall.SysProcAttr) (slave *os.File, err error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, err
	}
	if err := setSize(master, p.spec.TTY.Rows, p.spec.TTY.Cols); err != nil {
		master.Close()
		slave.Close()
		return nil, err
	}
	// A session leader cannot also setpgid; its session is its process group.
	sys.Setpgid = false
	sys.Setsid = true
	sys.Setctty = true
	sys.Ctty = 0
	p.tty = newTerminal(master)
	p.pipes[0] = master
	return slave, nil
}

// WriteTerminal writes input to the terminal (through its line discipline:
// 0x03 becomes SIGINT for the foreground process group).
func (p *Process) WriteTerminal(b []byte) error {
	if p.tty == nil {
		return ErrNoTerminal
	}
	p.tty.touch()
	_, err := p.tty.master.Write(b)
	return err
}

// ResizeTerminal sets the terminal's size; the kernel sends SIGWINCH to its
// foreground process group.
func (p *Process) ResizeTerminal(rows, cols uint16) error {
	if p.tty == nil {
		return ErrNoTerminal
	}
	return setSize(p.tty.master, rows, cols)
}

// setSize sets a terminal's window size (TIOCSWINSZ) through the file's
// poller-safe descriptor access: File.Fd would switch the master to
// blocking mode and race with its Close.
func setSize(f *os.File, rows, cols uint16) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := raw.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}); err != nil {
		return err
	}
	return ioErr
}

// Terminal is the master side of a PTY execution (nil without one), for
// readiness probes; it is closed when the execution ends.
func (p *Process) Terminal() *os.File {
	if p.tty == nil {
		return nil
	}
	return p.tty.master
}
