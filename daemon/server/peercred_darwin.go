package server

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

func readPeer(c *net.UnixConn) (PeerInfo, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return PeerInfo{}, err
	}
	var cred *unix.Xucred
	var pid int
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if cerr == nil {
			pid, cerr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		}
	}); err != nil {
		return PeerInfo{}, err
	}
	if cerr != nil {
		return PeerInfo{}, fmt.Errorf("reading peer credentials: %w", cerr)
	}
	info := PeerInfo{UID: cred.Uid, PID: int32(pid)}
	if cred.Ngroups > 0 {
		info.GID = cred.Groups[0]
	}
	return info, nil
}
