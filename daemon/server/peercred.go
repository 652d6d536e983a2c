package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// PeerInfo is the caller's identity as the kernel reported it for the socket.
type PeerInfo struct {
	credentials.CommonAuthInfo
	UID, GID uint32
	PID      int32
}

// AuthType names the mechanism.
func (PeerInfo) AuthType() string { return "peercred" }

// peerSockopt runs read on c's descriptor, where each system's readPeer
// asks the kernel for the peer's credentials.
func peerSockopt(c *net.UnixConn, read func(fd int) error) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	if err := raw.Control(func(fd uintptr) { rerr = read(int(fd)) }); err != nil {
		return err
	}
	if rerr != nil {
		return fmt.Errorf("reading peer credentials: %w", rerr)
	}
	return nil
}

// peerCreds is a TransportCredentials that reads the peer's uid/gid/pid from
// the unix socket at accept time and refuses peers started by termd itself.
type peerCreds struct {
	refuse func(pid int32) error
	tls    *tlsSide // the mutual-TLS listener's side (TCP connections)
}

func (p peerCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var info PeerInfo
	switch uc := c.(type) {
	case *admittedConn: // read at accept
		info = uc.info
	case *net.UnixConn:
		var err error
		if info, err = readPeer(uc); err != nil {
			return nil, nil, err
		}
	case *tcpConn: // the mutual-TLS listener, admitted at accept
		if p.tls == nil {
			return nil, nil, errors.New("termd has no TLS listener")
		}
		return p.tls.handshake(c)
	default:
		return nil, nil, errors.New("termd accepts unix socket connections only")
	}
	if p.refuse != nil {
		if err := p.refuse(info.PID); err != nil {
			return nil, nil, err
		}
		// The kernel recorded the process that called connect(); it may have
		// exited since and left the connection to another process. A pid
		// that is gone cannot be placed (inside an execution or not), so
		// the check above proved nothing: refuse. Checked after refuse, so
		// a process alive during that check was placed by it.
		if info.PID > 0 && syscall.Kill(int(info.PID), 0) == syscall.ESRCH {
			return nil, nil, fmt.Errorf("pid %d that opened this connection has exited; connect from the process that uses the connection", info.PID)
		}
	}
	info.SecurityLevel = credentials.PrivacyAndIntegrity
	return c, info, nil
}

func (peerCreds) ClientHandshake(_ context.Context, _ string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c, nil, nil
}
func (peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "peercred"}
}
func (p peerCreds) Clone() credentials.TransportCredentials { return p }
func (peerCreds) OverrideServerName(string) error           { return nil }

// PeerFrom returns the caller's peer credentials from a request context.
func PeerFrom(ctx context.Context) (PeerInfo, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return PeerInfo{}, false
	}
	info, ok := p.AuthInfo.(PeerInfo)
	return info, ok
}
