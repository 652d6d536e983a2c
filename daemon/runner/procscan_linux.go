package runner

import (
	"os"

	"golang.org/x/sys/unix"
	"strconv"
	"strings"
)

// procInfo is the part of /proc/<pid>/stat we need to follow process trees.
// start (clock ticks since boot) makes (pid, start) a stable identity across
// pid reuse.
type procInfo struct {
	pid, ppid, pgid, sid int
	state                byte
	start                uint64
}

func readProc(pid int) (procInfo, bool) {
	var buf [1024]byte
	return readProcBuf(pid, buf[:])
}

// readProcBuf reads /proc/<pid>/stat with one open+read (no stat, no
// allocation beyond the string); scanning /proc is on the cleanup path.
func readProcBuf(pid int, buf []byte) (procInfo, bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procInfo{}, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return procInfo{}, false
	}
	return parseStat(pid, string(buf[:n]))
}

func parseStat(pid int, s string) (procInfo, bool) {
	// The command name is in parentheses and may itself contain ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return procInfo{}, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 20 {
		return procInfo{}, false
	}
	pi := procInfo{pid: pid, state: f[0][0]}
	pi.ppid, _ = strconv.Atoi(f[1])
	pi.pgid, _ = strconv.Atoi(f[2])
	pi.sid, _ = strconv.Atoi(f[3])
	pi.start, _ = strconv.ParseUint(f[19], 10, 64)
	return pi, true
}

// snapshot reads every process in /proc.
func snapshot() map[int]procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make(map[int]procInfo, len(names))
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

// descendants returns every process in snap whose ppid chain reaches one of roots
// (roots included when present).
func descendants(snap map[int]procInfo, roots map[int]bool) map[int]procInfo {
	children := make(map[int][]int, len(snap))
	for pid, pi := range snap {
		children[pi.ppid] = append(children[pi.ppid], pid)
	}
	out := map[int]procInfo{}
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

// cgroupOf returns /proc/<pid>/cgroup parsed.
func cgroupOf(pid int) (ownPaths, bool) {
	if !exists("/proc/" + strconv.Itoa(pid)) {
		return ownPaths{}, false
	}
	return ownCgroup(strconv.Itoa(pid)), true
}
