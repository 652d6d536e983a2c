package hostfs

import (
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// asCaller runs f on a locked OS thread whose filesystem credentials are the
// caller's (fsuid, fsgid and supplementary groups; a non-zero fsuid also
// clears the thread's DAC capabilities), so the kernel decides every open f
// makes: mode bits, POSIX ACLs, and whatever else it knows. It reports false,
// without running f, when termd is not root (it cannot take on another uid)
// or the caller is root. Only the calling thread changes; if its credentials
// cannot be restored the thread stays locked and exits with the goroutine.
func asCaller(p *termdv1.Principal, f func()) (bool, error) {
	if os.Geteuid() != 0 || p.GetUid() == 0 {
		return false, nil
	}
	uid, gidSet := callerIDs(p)
	groups := make([]uint32, 0, len(gidSet))
	for g := range gidSet {
		groups = append(groups, g)
	}
	old, err := unix.Getgroups()
	if err != nil {
		return false, err
	}
	egid := os.Getegid()
	runtime.LockOSThread()
	restored := false
	defer func() {
		if restored {
			runtime.UnlockOSThread()
		}
	}()
	// setgroups through the raw syscall changes this thread only (the libc
	// and Go wrappers change every thread of the process).
	if err := setThreadGroups(groups); err != nil {
		restored = setThreadGroups(intsToU32(old)) == nil
		return false, err
	}
	_, _ = unix.SetfsgidRetGid(int(p.GetGid()))
	_, _ = unix.SetfsuidRetUid(int(uid))
	ok := false
	if cur, _ := unix.SetfsuidRetUid(-1); cur == int(uid) {
		if cur, _ := unix.SetfsgidRetGid(-1); cur == int(p.GetGid()) {
			ok = true
		}
	}
	if ok {
		f()
	}
	_, _ = unix.SetfsuidRetUid(0)
	_, _ = unix.SetfsgidRetGid(egid)
	cu, _ := unix.SetfsuidRetUid(-1)
	cg, _ := unix.SetfsgidRetGid(-1)
	restored = cu == 0 && cg == egid && setThreadGroups(intsToU32(old)) == nil
	if !ok {
		return false, errCredSwitch
	}
	return true, nil
}

func setThreadGroups(gs []uint32) error {
	var ptr unsafe.Pointer
	if len(gs) > 0 {
		ptr = unsafe.Pointer(&gs[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gs)), uintptr(ptr), 0); e != 0 {
		return e
	}
	return nil
}

func intsToU32(in []int) []uint32 {
	out := make([]uint32, len(in))
	for i, v := range in {
		out[i] = uint32(v)
	}
	return out
}
