package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os/user"
	"strconv"
	"sync/atomic"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/daemon/config"
)

// TLSConfig builds the mutual-TLS listener's server configuration: TLS 1.3
// only, a client certificate required and verified against client_ca_file.
// A handshake without one, or with one from another CA, fails before any
// call; which principal a verified certificate is, is decided per call
// (listen_tls.clients, reloaded on SIGHUP).
func TLSConfig(l config.ListenTLS) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("listen_tls.cert_file %s with key_file %s: %w", l.CertFile, l.KeyFile, err)
	}
	pool, err := config.LoadCAPool(l.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("listen_tls.client_ca_file: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}

// ListenTCP opens the mutual-TLS listener's TCP socket at addr. Serve it
// with Serve like the unix sockets: the handshake is part of the server's
// transport credentials, bounded by connections.handshake_timeout.
func ListenTCP(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen_tls.address %s: %w", addr, err)
	}
	return l, nil
}

// SetTLS replaces the listener's certificates (SIGHUP after a rotation).
func (s *Server) SetTLS(c *tls.Config) { s.tls.conf.Store(c) }

// TLSStats is how many handshakes on the mutual-TLS listener failed (no
// client certificate, another CA, not TLS 1.3) and how many calls arrived
// over it (refused at authentication or not) since start.
func (s *Server) TLSStats() (handshakesRefused, calls int64) {
	return s.tls.refused.Load(), s.tls.calls.Load()
}

// tlsSide is the mutual-TLS half of the transport credentials.
type tlsSide struct {
	conf    atomic.Pointer[tls.Config]
	refused atomic.Int64
	calls   atomic.Int64
	log     func(msg string, args ...any)
}

// handshake runs the server side of the TLS handshake on a TCP connection.
func (t *tlsSide) handshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conf := t.conf.Load()
	if conf == nil {
		return nil, nil, fmt.Errorf("termd has no TLS listener configured")
	}
	conn, info, err := credentials.NewTLS(conf).ServerHandshake(c)
	if err != nil {
		if n := t.refused.Add(1); n%1000 == 1 && t.log != nil { // a flood must not flood the log too
			t.log("refused a TLS handshake", "remote", c.RemoteAddr().String(), "error", err.Error(), "refused_so_far", n)
		}
		return nil, nil, err
	}
	return conn, info, nil
}

// tlsFrom returns the verified client certificate's TLS state of a call.
func tlsFrom(ctx context.Context) (credentials.TLSInfo, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return credentials.TLSInfo{}, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	return info, ok && len(info.State.PeerCertificates) > 0
}

// nobody is the uid and gid of an operator or viewer certificate without
// run_as: a uid that owns nothing, so it neither aliases a local user nor
// reads what only they may.
func nobody() (uint32, uint32) {
	if u, err := user.Lookup("nobody"); err == nil {
		a, err1 := strconv.ParseUint(u.Uid, 10, 32)
		b, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			return uint32(a), uint32(b)
		}
	}
	return 65534, 65534
}

// tlsIdentity maps a call's verified client certificate to a principal.
func (s *Server) tlsIdentity(info credentials.TLSInfo) (identity, error) {
	s.tls.calls.Add(1)
	leaf := info.State.PeerCertificates[0]
	ent, err := s.cfg().ListenTLS.ClientFor(leaf)
	if err != nil {
		return identity{}, status.Error(codes.PermissionDenied, err.Error())
	}
	id := identity{role: ent.RoleValue(), name: ent.Name, cert: ent.Name, gateway: ent.Gateway}
	id.uid, id.gid = nobody()
	if ent.RunAs != "" {
		if id.uid, id.gid, err = config.LookupRunAs(ent.RunAs); err != nil {
			return identity{}, status.Errorf(codes.FailedPrecondition, "listen_tls.clients %s: run_as: %v", ent.Name, err)
		}
	}
	return id, nil
}

// personName checks a name a gateway certificate gives for the person it
// acts for: printable, at most 128 bytes.
func personName(s string) error {
	if s == "" || len(s) > 128 {
		return fmt.Errorf("must be 1 to 128 bytes")
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("must be printable")
		}
	}
	return nil
}
