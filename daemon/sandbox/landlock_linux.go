package sandbox

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Thin Landlock system calls. go-landlock's syscall package would bring in
// libcap's psx, which wraps pthread_create in every cgo build of the daemon;
// the daemon only needs these three calls (the launcher makes the fourth).

func landlockABI() (int, error) {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0, e
	}
	return int(v), nil
}

func landlockCreateRuleset(attr *unix.LandlockRulesetAttr) (int, error) {
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr), 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func landlockAddPathRule(ruleset, parent int, access uint64) error {
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(parent)}
	_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
