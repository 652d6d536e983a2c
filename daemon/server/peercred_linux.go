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
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return PeerInfo{}, err
	}
	if cerr != nil {
		return PeerInfo{}, fmt.Errorf("reading peer credentials: %w", cerr)
	}
	return PeerInfo{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}, nil
}
