// Package proctree reads processes from /proc: one process's parent,
// process group, session, state and start time (Read), every process at
// once (Snapshot), and the processes below some roots (Descendants). The
// runner follows an execution's process tree with it where no cgroup holds
// the execution, and identifies a process across pid reuse by (pid, start).
//
// It owns no state and imports only the standard library and
// golang.org/x/sys/unix.
package proctree

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Info is the part of /proc/<pid>/stat we need to follow process trees.
// Start (clock ticks since boot) makes (Pid, Start) a stable identity across
// pid reuse.
type Info struct {
	Pid, PPid, Pgid, Sid int
	State                byte
	Start                uint64
}

// Read reads /proc/<pid>/stat; false when the process is gone.
func Read(pid int) (Info, bool) {
	var buf [1024]byte
	return readProcBuf(pid, buf[:])
}

// readProcBuf reads /proc/<pid>/stat with one open+read (no stat, no
// allocation beyond the string); scanning /proc is on the cleanup path.
func readProcBuf(pid int, buf []byte) (Info, bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Info{}, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return Info{}, false
	}
	return parseStat(pid, string(buf[:n]))
}

func parseStat(pid int, s string) (Info, bool) {
	// The command name is in parentheses and may itself contain ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return Info{}, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 20 {
		return Info{}, false
	}
	pi := Info{Pid: pid, State: f[0][0]}
	pi.PPid, _ = strconv.Atoi(f[1])
	pi.Pgid, _ = strconv.Atoi(f[2])
	pi.Sid, _ = strconv.Atoi(f[3])
	pi.Start, _ = strconv.ParseUint(f[19], 10, 64)
	return pi, true
}

// Snapshot reads every process in /proc.
func Snapshot() map[int]Info {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make(map[int]Info, len(names))
	buf := make([]byte, 1024)
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if pi, ok := readProcBuf(pid, buf); ok {
			out[pid] = pi
		}
	}
	return out
}

// Descendants returns every process in snap whose ppid chain reaches one of roots
// (roots included when present).
func Descendants(snap map[int]Info, roots map[int]bool) map[int]Info {
	children := make(map[int][]int, len(snap))
	for pid, pi := range snap {
		children[pi.PPid] = append(children[pi.PPid], pid)
	}
	out := map[int]Info{}
	var stack []int
	for r := range roots {
		if pi, ok := snap[r]; ok {
			out[r] = pi
		}
		stack = append(stack, r)
	}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range children[p] {
			if _, seen := out[c]; !seen {
				out[c] = snap[c]
				stack = append(stack, c)
			}
		}
	}
	return out
}
