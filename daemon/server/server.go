// Package server is the daemon's gRPC transport: it authenticates callers from
// the socket's peer credentials, checks roles, and translates calls into the
// domain layer. It holds no domain logic.
package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/termd/termd/daemon/config"
)

// Server is the gRPC front of the daemon.
type Server struct {
	cfgp     atomic.Pointer[config.Config]
	log      *slog.Logger
	grpc     *grpc.Server
	health   *health.Server
	admit    *admission
	inflight inflight
	tls      *tlsSide
	started  time.Time
}

// Options configure a Server.
type Options struct {
	Config *config.Config
	Log    *slog.Logger
	// RefusePeer refuses connections from processes termd started (no calling back).
	RefusePeer func(pid int32) error
	// TLS is the mutual-TLS listener's configuration (TLSConfig); nil when
	// termd listens on no TCP address.
	TLS *tls.Config
}

// New builds a server; Register adds the domain services before Serve.
func New(o Options) *Server {
	s := &Server{log: o.Log, started: time.Now(), tls: &tlsSide{log: o.Log.Warn}}
	s.cfgp.Store(o.Config)
	s.tls.conf.Store(o.TLS)
	s.admit = newAdmission(s)
	lim := o.Config.Connections
	s.grpc = grpc.NewServer(
		grpc.Creds(peerCreds{refuse: o.RefusePeer, tls: s.tls}),
		grpc.ChainUnaryInterceptor(s.unaryAuth),
		grpc.ChainStreamInterceptor(s.streamAuth),
		// A connection must finish the HTTP/2 handshake in time and is
		// closed when it carries no call for IdleTimeout; clients may not
		// ping more often than every 10s (keepalive enforcement).
		grpc.ConnectionTimeout(lim.HandshakeTimeout.D()),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: lim.IdleTimeout.D(),
			Time:              time.Minute,
			Timeout:           20 * time.Second,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxConcurrentStreams(uint32(lim.MaxStreams)),
		grpc.MaxRecvMsgSize(lim.MaxMessageBytes),
		grpc.MaxSendMsgSize(16<<20),   // what client.Dial accepts
		grpc.MaxHeaderListSize(2<<20), // termd reads a few short metadata values (oversized ones are refused by name)
		// Fixed flow-control windows: a slow stream reader cannot make the
		// daemon buffer megabytes of output for it (no BDP window growth).
		grpc.InitialWindowSize(256<<10),
		grpc.InitialConnWindowSize(1<<20),
		// Calls run on goroutines kept for them, whose stacks have grown
		// already (a call that finds them all busy gets a new one).
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	return s
}

// GRPC exposes the grpc.Server so services can be registered on it.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Started is when the server was created.
func (s *Server) Started() time.Time { return s.started }

// SetConfig swaps the active configuration (after a successful reload).
func (s *Server) SetConfig(c *config.Config) { s.cfgp.Store(c) }

func (s *Server) cfg() *config.Config { return s.cfgp.Load() }

// Serve serves on l until Stop.
func (s *Server) Serve(l net.Listener) error {
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	err := s.grpc.Serve(&admittedListener{Listener: l, a: s.admit, log: s.log.Warn})
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Connections is how many connections are open now, and how many were refused
// at accept (no role, or over a cap) since start.
func (s *Server) Connections() (open, refused int64) {
	return s.admit.total.Load(), s.admit.refused.Load()
}

// Drain marks the server not serving (health) so clients stop sending work.
func (s *Server) Drain() { s.health.Shutdown() }

// Stop closes listeners and streams, waiting up to d for unary calls to end.
func (s *Server) Stop(d time.Duration) {
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		s.grpc.Stop()
	}
}

// Listen creates the unix socket: directory 0750, socket 0660, group from config.
func Listen(path, group string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if st, err := os.Stat(dir); err == nil && st.Mode()&os.ModeSticky != 0 {
		// A shared directory such as /tmp: making it 0750 would lock every
		// other user out of it.
		return nil, fmt.Errorf("socket %s: %s is a shared directory (sticky bit set); put the socket in a directory of its own, e.g. %s", path, dir, filepath.Join(dir, "termd", filepath.Base(path)))
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		return nil, fmt.Errorf("socket directory %s: %w", dir, err)
	}
	l, err := listenAt(path, 0o660, "--socket")
	if err != nil {
		return nil, err
	}
	if group != "" {
		gid, err := groupID(group)
		if err != nil {
			l.Close()
			return nil, err
		}
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("socket_group %s: %w", group, err)
		}
		_ = os.Chown(dir, -1, gid)
	}
	return l, nil
}

// ErrSocketPathTooLong: the operator socket's path does not fit a sockaddr_un.
var ErrSocketPathTooLong = errors.New("operator socket path too long")

// ListenOperator creates the operator socket: mode 0600, so only root and
// termd's own user can connect, whatever agents do to the shared socket. Its
// directory is made 0750 when missing and otherwise left as it is (it is
// usually the shared socket's).
func ListenOperator(path string) (net.Listener, error) {
	if len(path) >= len(syscall.RawSockaddrUnix{}.Path) {
		return nil, fmt.Errorf("%w: %s is %d bytes long, a unix socket path may have at most %d: set operator_socket to a shorter path (or none)", ErrSocketPathTooLong, path, len(path), len(syscall.RawSockaddrUnix{}.Path)-1)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("operator socket directory %s: %w", dir, err)
	}
	return listenAt(path, 0o600, "operator_socket")
}

// listenAt listens on a unix socket at path with mode, replacing a stale
// socket file (one nothing listens on). what names the setting to change.
func listenAt(path string, mode os.FileMode, what string) (net.Listener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket %s exists and is not a socket; remove it or choose another %s", path, what)
		}
		if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s: another termd is already listening there", path)
		}
		_ = os.Remove(path)
	}
	old := syscall.Umask(0o777 &^ int(mode))
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func groupID(g string) (int, error) {
	if n, err := strconv.Atoi(g); err == nil {
		return n, nil
	}
	grp, err := lookupGroup(g)
	if err != nil {
		return 0, fmt.Errorf("socket_group: unknown group %q (create it with `groupadd --system %s`, or remove socket_group from the config)", g, g)
	}
	return strconv.Atoi(grp.Gid)
}

func lookupGroup(g string) (*user.Group, error) { return user.LookupGroup(g) }
