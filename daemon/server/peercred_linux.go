package server

import (
	"net"

	"golang.org/x/sys/unix"
)

func readPeer(c *net.UnixConn) (PeerInfo, error) {
	var cred *unix.Ucred
	err := peerSockopt(c, func(fd int) (err error) {
		cred, err = unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
		return err
	})
	if err != nil {
		return PeerInfo{}, err
	}
	return PeerInfo{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}, nil
}
