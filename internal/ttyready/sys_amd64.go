//go:build linux && amd64

package ttyready

import "golang.org/x/sys/unix"

// Syscalls only amd64 has besides the generic ones (arm64 and the newer
// ports have only the p- and epoll_pwait forms).
var archSyscalls = map[uint64]syscallKind{
	unix.SYS_SELECT:     kindSelect,
	unix.SYS_POLL:       kindPoll,
	unix.SYS_EPOLL_WAIT: kindEpoll,
}
