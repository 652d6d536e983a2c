package server

import (
	"net"

	"golang.org/x/sys/unix"
)

func readPeer(c *net.UnixConn) (PeerInfo, error) {
	var cred *unix.Xucred
	var pid int
	err := peerSockopt(c, func(fd int) (err error) {
		if cred, err = unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED); err != nil {
			return err
		}
		pid, err = unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		return err
	})
	if err != nil {
		return PeerInfo{}, err
	}
	info := PeerInfo{UID: cred.Uid, PID: int32(pid)}
	if cred.Ngroups > 0 {
		info.GID = cred.Groups[0]
	}
	return info, nil
}
