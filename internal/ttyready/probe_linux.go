package ttyready

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type syscallKind uint8

const (
	kindOther  syscallKind = iota
	kindRead               // arg0 is the descriptor read
	kindSelect             // arg0 nfds, arg1 the read fd_set
	kindPoll               // arg0 the pollfd array, arg1 its length
	kindEpoll              // arg0 the epoll descriptor
)

var genericSyscalls = map[uint64]syscallKind{
	unix.SYS_READ:         kindRead,
	unix.SYS_READV:        kindRead,
	unix.SYS_PREAD64:      kindRead,
	unix.SYS_PREADV:       kindRead,
	unix.SYS_PREADV2:      kindRead,
	unix.SYS_PSELECT6:     kindSelect,
	unix.SYS_PPOLL:        kindPoll,
	unix.SYS_EPOLL_PWAIT:  kindEpoll,
	unix.SYS_EPOLL_PWAIT2: kindEpoll,
}

func kindOf(nr uint64) syscallKind {
	if k, ok := genericSyscalls[nr]; ok {
		return k
	}
	return archSyscalls[nr]
}

// Kernel functions a task sleeps in while it waits in a read or a
// select-family call, for when its descriptor sets cannot be read.
var waitChannels = map[string]bool{
	"n_tty_read": true, "wait_woken": true, "do_select": true, "core_sys_select": true,
	"do_sys_poll": true, "poll_schedule_timeout": true, "ep_poll": true, "do_epoll_wait": true,
}

const (
	ptySlaveMajor = 136 // UNIX98_PTY_SLAVE_MAJOR: /dev/pts/N is (136, N)
	ttyMajor      = 5   // /dev/tty is (5, 0): the process's controlling terminal
)

// ForegroundReading reports whether the foreground process group of the
// terminal whose master is ptmx is blocked waiting to read from that
// terminal, and which process showed it. It never blocks. It returns false
// (and no error) when the terminal has no foreground group, as after its
// program exited.
func ForegroundReading(ptmx *os.File) (reading bool, pid int, err error) {
	if ptmx == nil {
		return false, 0, errors.New("readiness probe: no terminal (nil pty master)")
	}
	var pgid int
	var ptn uint32
	var ioErr error
	raw, err := ptmx.SyscallConn()
	if err != nil {
		return false, 0, fmt.Errorf("readiness probe: %w", err)
	}
	// Control, not Fd: Fd would put the master into blocking mode.
	if err := raw.Control(func(fd uintptr) {
		if pgid, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); ioErr != nil {
			ioErr = fmt.Errorf("read the terminal's foreground process group (TIOCGPGRP): %w", ioErr)
			return
		}
		if ptn, ioErr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN); ioErr != nil {
			ioErr = fmt.Errorf("read the terminal's number (TIOCGPTN; is %s a pty master?): %w", ptmx.Name(), ioErr)
		}
	}); err != nil {
		return false, 0, fmt.Errorf("readiness probe: %w", err)
	}
	if ioErr != nil {
		return false, 0, fmt.Errorf("readiness probe: %w", ioErr)
	}
	if pgid <= 0 {
		return false, 0, nil
	}
	p := probe{slave: unix.Mkdev(ptySlaveMajor, ptn), pgid: pgid}
	// The group leader first: most often it is the program itself.
	if r, err := p.process(pgid); err != nil || r {
		return r, pgid, err
	}
	for _, m := range members(pgid) {
		if m == pgid {
			continue
		}
		if r, err := p.process(m); err != nil || r {
			return r, m, err
		}
	}
	return false, 0, nil
}

type probe struct {
	slave uint64
	pgid  int
}

// process reports whether one of pid's tasks is blocked reading the
// terminal. A process that is gone is not reading.
func (p probe) process(pid int) (bool, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	st, err := readStat(dir + "/stat")
	if err != nil || st.pgrp != p.pgid {
		return false, nil // gone, or no longer in the group
	}
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil {
		return false, nil
	}
	for _, task := range tasks {
		r, err := p.task(pid, dir+"/task/"+task.Name())
		if err != nil || r {
			return r, err
		}
	}
	return false, nil
}

func (p probe) task(pid int, dir string) (bool, error) {
	st, err := readStat(dir + "/stat")
	if err != nil || st.state != 'S' {
		return false, nil
	}
	b, err := os.ReadFile(dir + "/syscall")
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return false, fmt.Errorf("readiness probe: no ptrace access to process %d (%v); run termd as root or as the program's user", pid, err)
		}
		return false, nil
	}
	f := strings.Fields(string(b))
	if len(f) < 4 || f[0] == "running" || f[0] == "-1" {
		return false, nil
	}
	nr, err1 := strconv.ParseUint(f[0], 10, 64)
	a0, err2 := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	a1, err3 := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return false, nil
	}
	switch kindOf(nr) {
	case kindRead:
		return p.isTerminal(pid, int(int32(a0))), nil
	case kindSelect:
		fds, err := selectFds(pid, a0, a1)
		if err != nil {
			return p.fallback(pid, dir), nil
		}
		return p.anyTerminal(pid, fds), nil
	case kindPoll:
		fds, err := pollFds(pid, a0, a1)
		if err != nil {
			return p.fallback(pid, dir), nil
		}
		return p.anyTerminal(pid, fds), nil
	case kindEpoll:
		return p.anyTerminal(pid, epollFds(pid, int(int32(a0)))), nil
	}
	return false, nil
}

// fallback decides without the descriptor sets: the task sleeps where a
// terminal read or a select-family wait sleeps, and its standard input,
// output or error is the terminal.
func (p probe) fallback(pid int, dir string) bool {
	w, err := os.ReadFile(dir + "/wchan")
	if err != nil || !waitChannels[strings.TrimSpace(string(w))] {
		return false
	}
	return p.anyTerminal(pid, []int{0, 1, 2})
}

func (p probe) anyTerminal(pid int, fds []int) bool {
	for _, fd := range fds {
		if p.isTerminal(pid, fd) {
			return true
		}
	}
	return false
}

// isTerminal reports whether pid's descriptor fd is this terminal's slave,
// directly or as /dev/tty while the slave is its controlling terminal.
func (p probe) isTerminal(pid, fd int) bool {
	if fd < 0 {
		return false
	}
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return false
	}
	rdev := uint64(st.Rdev)
	if rdev == p.slave {
		return true
	}
	if rdev == unix.Mkdev(ttyMajor, 0) {
		ps, err := readStat("/proc/" + strconv.Itoa(pid) + "/stat")
		return err == nil && ps.ttyMajor == ptySlaveMajor && unix.Mkdev(ps.ttyMajor, ps.ttyMinor) == p.slave
	}
	return false
}

// selectFds reads the read set of a select or pselect6 call from the
// task's memory (the kernel writes it back only when the call returns).
func selectFds(pid int, nfds, readfds uint64) ([]int, error) {
	if readfds == 0 {
		return nil, nil
	}
	nfds = min(nfds, 1024)
	word := uint64(unsafe.Sizeof(uintptr(0)))
	size := (nfds + word*8 - 1) / (word * 8) * word
	b, err := readMem(pid, readfds, int(size))
	if err != nil {
		return nil, err
	}
	var fds []int
	for fd := uint64(0); fd < nfds; fd++ {
		w := fd / (word * 8)
		var v uint64
		if word == 8 {
			v = binary.NativeEndian.Uint64(b[w*8:])
		} else {
			v = uint64(binary.NativeEndian.Uint32(b[w*4:]))
		}
		if v&(1<<(fd%(word*8))) != 0 {
			fds = append(fds, int(fd))
		}
	}
	return fds, nil
}

// pollFds reads the descriptors a poll or ppoll call waits to read.
func pollFds(pid int, addr, n uint64) ([]int, error) {
	n = min(n, 1024)
	b, err := readMem(pid, addr, int(n*8)) // struct pollfd { int fd; short events, revents; }
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := 0; i+8 <= len(b); i += 8 {
		fd := int32(binary.NativeEndian.Uint32(b[i:]))
		events := binary.NativeEndian.Uint16(b[i+4:])
		if events&(unix.POLLIN|unix.POLLPRI) != 0 {
			fds = append(fds, int(fd))
		}
	}
	return fds, nil
}

// epollFds lists the descriptors an epoll instance watches for input, from
// /proc/<pid>/fdinfo/<epfd> ("tfd: N events: HEX ...").
func epollFds(pid, epfd int) []int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + strconv.Itoa(epfd))
	if err != nil {
		return nil
	}
	var fds []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != "tfd:" || f[2] != "events:" {
			continue
		}
		fd, err1 := strconv.Atoi(f[1])
		ev, err2 := strconv.ParseUint(f[3], 16, 32)
		if err1 == nil && err2 == nil && ev&(unix.EPOLLIN|unix.EPOLLPRI) != 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}

func readMem(pid int, addr uint64, n int) ([]byte, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(addr)); err != nil {
		return nil, err
	}
	return b, nil
}

type procStat struct {
	state              byte
	pgrp               int
	ttyMajor, ttyMinor uint32
}

// readStat reads the fields of /proc/.../stat the probe uses; the command
// name in parentheses may hold spaces and parentheses itself.
func readStat(path string) (procStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("%s: no command name", path)
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state ppid pgrp session tty_nr ...
	if len(f) < 5 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("%s: short", path)
	}
	pgrp, err1 := strconv.Atoi(f[2])
	tty, err2 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("%s: bad fields", path)
	}
	return procStat{
		state:    f[0][0],
		pgrp:     pgrp,
		ttyMajor: uint32(tty>>8) & 0xfff,
		ttyMinor: uint32(tty&0xff) | uint32(tty>>12)&0xfff00,
	}, nil
}

// members lists the processes of group pgid. Scanning /proc costs a read
// per process, so the list is kept for a short while: a probe every 15 ms
// then costs a scan a few times a second, and a process that joins the group
// is seen within memberTTL.
func members(pgid int) []int {
	now := time.Now()
	groups.Lock()
	g, ok := groups.m[pgid]
	groups.Unlock()
	if ok && now.Sub(g.at) < memberTTL {
		return g.pids
	}
	pids := scanGroup(pgid)
	groups.Lock()
	defer groups.Unlock()
	if groups.m == nil || len(groups.m) > 256 {
		for k, v := range groups.m {
			if now.Sub(v.at) > memberTTL {
				delete(groups.m, k)
			}
		}
		if groups.m == nil {
			groups.m = map[int]group{}
		}
	}
	groups.m[pgid] = group{pids: pids, at: now}
	return pids
}

const memberTTL = 250 * time.Millisecond

type group struct {
	pids []int
	at   time.Time
}

var groups struct {
	sync.Mutex
	m map[int]group
}

func scanGroup(pgid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if st, err := readStat("/proc/" + n + "/stat"); err == nil && st.pgrp == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}
