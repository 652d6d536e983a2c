// Package client is the one Go client of the termd daemon. termctl, the MCP
// bridge and the gateway all reach the daemon through it.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/internal/wire"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Options tune a connection.
type Options struct {
	// Via names the transport ("gateway", "mcp"); shown in receipts and logs.
	Via string
	// Role, when set, lowers the caller's role for every call on this connection.
	Role termdv1.Role
	// Name is a display name for the acting principal (honoured for operators only).
	Name string
	// CallTimeout, when set, is the deadline of each unary call whose context
	// has none (streams are not bounded by it).
	CallTimeout time.Duration
	// TLS, when set, connects over TCP with mutual TLS (a termd with
	// listen_tls) instead of the unix socket; see DialTLS for the target.
	TLS *TLS
}

// Client holds one connection and a typed client for each service.
type Client struct {
	conn   *grpc.ClientConn
	Socket string

	Daemon     termdv1.DaemonServiceClient
	Sessions   termdv1.SessionServiceClient
	Plans      termdv1.PlanServiceClient
	Executions termdv1.ExecutionServiceClient
	Events     termdv1.EventServiceClient
	Receipts   termdv1.ReceiptServiceClient
	Policy     termdv1.PolicyServiceClient
	Adviser    termdv1.AdviserServiceClient
	Workspace  termdv1.WorkspaceServiceClient
	Grants     termdv1.GrantServiceClient
	Recipes    termdv1.RecipeServiceClient
	Terminals  termdv1.TerminalServiceClient
	Forwards   termdv1.PortForwardServiceClient
}

// Dial connects to the daemon's unix socket. It does not wait for the daemon;
// the first call fails with a clear error when nothing listens. A target
// "tls://HOST:PORT", or any target when Options.TLS is set, is a termd's
// mutual-TLS listener instead (see dialTLS).
func Dial(socket string, opts ...Options) (*Client, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.TLS != nil || IsTLSTarget(socket) {
		return dialTLS(socket, o)
	}
	if socket == "" {
		socket = wire.DefaultSocket()
	}
	if !filepath.IsAbs(socket) {
		// "--socket .run/termd.sock": relative to where the user is (a
		// relative unix target would be read as a URL authority by gRPC).
		if abs, err := filepath.Abs(socket); err == nil {
			socket = abs
		}
	}
	return newClient("unix://"+socket, socket, o,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer(socket, operatorSocket(socket))),
		// Fixed flow-control windows, as the daemon has: gRPC's window
		// estimation (BDP) answers each response with a ping, a round trip
		// per call (a write and a read on each side, and their wake-ups)
		// that only a network with latency has a use for.
		grpc.WithInitialWindowSize(1<<20),
		grpc.WithInitialConnWindowSize(4<<20),
	)
}

// newClient makes the connection to target with the transport options given
// and what every connection has: o's metadata and call timeout on every
// call, errors worded for label (the socket or tls://HOST:PORT), and room
// for large answers.
func newClient(target, label string, o Options, transport ...grpc.DialOption) (*Client, error) {
	md := o.metadata()
	conn, err := grpc.NewClient(target, append(transport,
		grpc.WithChainUnaryInterceptor(unaryInterceptor(label, md, o.CallTimeout)),
		grpc.WithChainStreamInterceptor(streamInterceptor(label, md)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)),
	)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to termd at %s: %w", label, err)
	}
	return FromConn(conn, label), nil
}

// metadata is what every call on the connection carries.
func (o Options) metadata() metadata.MD {
	md := metadata.MD{}
	if o.Via != "" {
		md.Set(wire.MDVia, o.Via)
	}
	if o.Role != termdv1.Role_ROLE_UNSPECIFIED {
		md.Set(wire.MDRole, o.Role.String())
	}
	if o.Name != "" {
		md.Set(wire.MDName, o.Name)
	}
	return md
}

// operatorSocket is where the operator socket of socket is:
// $TERMD_OPERATOR_SOCKET, or beside socket under its usual name.
func operatorSocket(socket string) string {
	if s := os.Getenv(wire.OperatorSocketEnv); s != "" {
		return s
	}
	return wire.OperatorSocket(socket)
}

// dialer connects to the operator socket when this process may open it
// (root, termd's own user), else to the shared socket. termd accepts from
// the operator socket whatever agents do to the shared one. A shared socket
// whose queue of connections waiting to be accepted is full (clients
// connecting in a loop) refuses a connect with EAGAIN at once: the dialer
// then waits for its turn (waitConnect) until the call's connect deadline.
func dialer(socket, operator string) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		if operator != "" {
			if c, err := d.DialContext(ctx, "unix", operator); err == nil {
				return c, nil
			}
		}
		c, err := d.DialContext(ctx, "unix", socket)
		for errors.Is(err, syscall.EAGAIN) && ctx.Err() == nil {
			c, err = waitConnect(ctx, socket)
		}
		return c, err
	}
}

// FromConn wraps an established connection (tests that dial with their own
// options); Close closes conn.
func FromConn(conn *grpc.ClientConn, socket string) *Client {
	return &Client{
		conn:       conn,
		Socket:     socket,
		Daemon:     termdv1.NewDaemonServiceClient(conn),
		Sessions:   termdv1.NewSessionServiceClient(conn),
		Plans:      termdv1.NewPlanServiceClient(conn),
		Executions: termdv1.NewExecutionServiceClient(conn),
		Events:     termdv1.NewEventServiceClient(conn),
		Receipts:   termdv1.NewReceiptServiceClient(conn),
		Policy:     termdv1.NewPolicyServiceClient(conn),
		Adviser:    termdv1.NewAdviserServiceClient(conn),
		Workspace:  termdv1.NewWorkspaceServiceClient(conn),
		Grants:     termdv1.NewGrantServiceClient(conn),
		Recipes:    termdv1.NewRecipeServiceClient(conn),
		Terminals:  termdv1.NewTerminalServiceClient(conn),
		Forwards:   termdv1.NewPortForwardServiceClient(conn),
	}
}

// Conn exposes the underlying connection (the gateway registers REST handlers on it).
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// WaitReady blocks until the daemon answers its status call or ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Daemon.GetStatus(cctx, &termdv1.GetStatusRequest{})
		cancel()
		if err == nil {
			return nil
		}
		var e *Error
		if errors.As(err, &e) && e.Code != codes.Unavailable && e.Code != codes.DeadlineExceeded {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func unaryInterceptor(socket string, md metadata.MD, timeout time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := ctx.Deadline(); !ok && timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		if len(md) > 0 {
			ctx = metadata.NewOutgoingContext(ctx, metadata.Join(md, outgoing(ctx)))
		}
		return wrap(socket, invoker(ctx, method, req, reply, cc, opts...))
	}
}

func streamInterceptor(socket string, md metadata.MD) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if len(md) > 0 {
			ctx = metadata.NewOutgoingContext(ctx, metadata.Join(md, outgoing(ctx)))
		}
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, wrap(socket, err)
		}
		return &wrappedStream{ClientStream: s, socket: socket}, nil
	}
}

func outgoing(ctx context.Context) metadata.MD {
	md, _ := metadata.FromOutgoingContext(ctx)
	return md
}

type wrappedStream struct {
	grpc.ClientStream
	socket string
}

func (w *wrappedStream) RecvMsg(m any) error {
	err := w.ClientStream.RecvMsg(m)
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	if err.Error() == "EOF" {
		return err
	}
	return wrap(w.socket, err)
}

// Error is a daemon error in words: what failed and what to do.
type Error struct {
	Code    codes.Code
	Message string
	Hint    string
}

func (e *Error) Error() string {
	if e.Hint == "" {
		return e.Message
	}
	return e.Message + " (" + e.Hint + ")"
}

// GRPCStatus lets status.FromError see through the wrapper.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Error()) }

// Code returns the gRPC code of err (codes.OK for nil, codes.Unknown for non-daemon errors).
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return status.Code(err)
}

func wrap(socket string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: st.Code(), Message: st.Message()}
	if IsTLSTarget(socket) {
		return wrapTLS(socket, st, e)
	}
	switch st.Code() {
	case codes.Unavailable:
		if !transportFailure(st.Message()) {
			break // the daemon answered: something it depends on is unavailable
		}
		if why, ok := refusal(socket); ok {
			// termd turned the connection away at accept and said why.
			e.Code = codes.PermissionDenied
			e.Message = "termd refused the connection: " + why
			break
		}
		if strings.Contains(st.Message(), "resource temporarily unavailable") {
			// EAGAIN from connect: the accept queue stayed full.
			e.Message = "termd did not take the connection in time: the queue of connections waiting at " + socket + " stayed full (a client is connecting in a loop)"
			e.Hint = "try again; operators (root, termd's user) reach termd on its operator socket, which no agent can fill"
			break
		}
		if strings.Contains(st.Message(), "permission denied") {
			// The daemon is there; this user may not open its socket.
			e.Message = "this user may not connect to termd's socket " + socket + " (permission denied)"
			e.Hint = "add the user to the socket's group (socket_group in termd's config, e.g. `usermod -aG termd USER`, then log in again) and give it a role (roles.agents or roles.operators)"
			break
		}
		e.Message = "termd is not reachable at " + socket
		e.Hint = "start it with `make run` or `termd --socket " + socket + "`, or point --socket / TERMD_SOCKET at the right path"
		if fi, err := os.Stat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			// The file is there but nothing listens: a termd that was killed
			// (make run stopped) left it, and TERMD_SOCKET may still name it.
			e.Message = "termd is not running at " + socket + " (the socket file is left over from a termd that stopped)"
		}
		if local, err := filepath.Abs(".run/termd.sock"); err == nil && local != socket && answers(local) {
			e.Hint = "a termd started by `make run` listens at " + local + ": `export TERMD_SOCKET=" + local + "` (or pass --socket " + local + ")"
		}
	default:
		e.Hint = codeHints[st.Code()].local
	}
	return e
}

// codeHints say what to do about a refusal, in the terms of the transport
// it came over: the local socket's roles, or listen_tls's certificates
// (wrapTLS). What to do about an unreachable termd depends on how the
// connection failed; wrap and wrapTLS word it themselves.
var codeHints = map[codes.Code]struct{ local, tls string }{
	codes.PermissionDenied: {
		local: "ask an operator, or check the roles in the daemon's config",
		tls:   "ask the operator of that termd to map your certificate in listen_tls.clients, or to give it a stronger role",
	},
	codes.Unauthenticated: {
		local: "your user has no role in termd's config",
		tls:   "your certificate has no principal in that termd's listen_tls.clients",
	},
	codes.DeadlineExceeded: {local: "the daemon did not answer in time", tls: "termd did not answer in time"},
}

// refusal asks termd, on a connection of its own, whether it turns this
// process's connections away at accept (no role, or over a connection cap)
// and why: termd says so in the debug text of an HTTP/2 GOAWAY, which gRPC
// does not always pass on. Used only after a call has failed to connect.
func refusal(socket string) (string, bool) {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return "", false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return "", false
	}
	fr := http2.NewFramer(io.Discard, c)
	for i := 0; i < 4; i++ {
		f, err := fr.ReadFrame()
		if err != nil {
			return "", false
		}
		if g, ok := f.(*http2.GoAwayFrame); ok && len(g.DebugData()) > 0 {
			return string(g.DebugData()), true
		}
	}
	return "", false
}

// transportFailure tells a connection failure from an Unavailable answer of the daemon.
func transportFailure(msg string) bool {
	for _, p := range []string{"connection error", "transport", "dial", "connection refused", "no such file", "connection reset", "EOF", "closing", "draining", "permission denied", "resource temporarily unavailable"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// answers says whether something accepts connections on the unix socket
// path: a socket file a stopped termd left behind does not.
func answers(path string) bool {
	c, err := net.DialTimeout("unix", path, 300*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
