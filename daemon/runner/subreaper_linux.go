package runner

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// EnableSubreaper makes this process a child subreaper (PR_SET_CHILD_SUBREAPER),
// so descendants of executions that are orphaned (double fork, setsid) are
// re-parented to us instead of to init: they stay visible through the ppid
// chain and we can kill and reap them. The daemon calls it once at start.
//
// Reaping strategy: we never call wait on "any child" (that would steal exit
// statuses from os/exec). The main process of an execution is reaped by its own
// os.Process. Other zombies are reaped one pid at a time with wait4(pid), and
// only when that pid is a known orphan of one of our executions: it sits in an
// execution cgroup of this Runner, or (without cgroups) it was seen in the
// execution's process tree, and its start time matches what we recorded.
func EnableSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

func isSubreaper() bool {
	var flag int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&flag)), 0, 0, 0); err != nil {
		return false
	}
	return flag != 0
}
