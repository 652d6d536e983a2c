package runner

import "golang.org/x/sys/unix"

// procStart is pid's start time in µs since the epoch (p_starttime; 0: no
// such pid): with the pid it names one process across pid reuse.
func procStart(pid int) uint64 {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		return 0
	}
	t := kp.Proc.P_starttime
	return uint64(t.Sec)*1_000_000 + uint64(t.Usec)
}
