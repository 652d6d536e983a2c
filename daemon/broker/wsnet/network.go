// Package wsnet is the broker's workspace network: the workspace loopbacks
// (one network namespace per principal and workspace, daemon/netns) that
// executions join, the port forwards from the host into them, and the
// allow-list proxy each egress:NAME execution gets in a namespace of its own
// (egress.go, serving daemon/egress).
//
// It imports daemon/domain, daemon/config, daemon/errdefs, daemon/events,
// daemon/netns, daemon/egress, internal/netmode, receipt and the generated
// proto; never daemon/broker or a sibling noun package. What it needs of the
// broker (the runner's capability, the executions and sessions a forward
// reaches) comes through Deps.
package wsnet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	"github.com/termd/termd/daemon/netns"
	"github.com/termd/termd/internal/netmode"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Workspace loopbacks and port forwards (docs/SANDBOX.md, "Network").

// Deps are what Net needs of the daemon and the broker.
type Deps struct {
	Config func() *config.Config
	Log    *slog.Logger
	Bus    *events.Bus
	// NetNS says whether this daemon can make network namespaces (the
	// runner's capability).
	NetNS func() bool
	// WorkspaceOf is the workspace root that holds a directory ("" when
	// none does).
	WorkspaceOf func(dir string) string
	// Executions finds what a port forward reaches.
	Executions Executions
}

// Loopback is an execution's network as a port forward sees it.
type Loopback struct {
	ExecutionID string
	SessionID   string
	Owner       *termdv1.Principal // its session's owner
	Mode        string             // its network mode ("" = none)
	Key         netns.Key          // its workspace loopback (zero: none)
}

// Executions is the broker's side of a port forward: the executions and
// sessions a caller may see.
type Executions interface {
	// Execution is the execution id as caller may see it, or the error
	// that says it is not found.
	Execution(caller *termdv1.Principal, id string) (Loopback, error)
	// Session is the owner of session id (nil: caller cannot see it) and
	// the latest of its executions that ran on a workspace loopback (ok
	// false: none).
	Session(caller *termdv1.Principal, id string) (owner *termdv1.Principal, latest Loopback, ok bool)
}

// Net is the broker's network part: the workspace loopbacks, the open port
// forwards and the executions' egress proxies.
type Net struct {
	Deps

	once     sync.Once
	loops    *netns.Manager // nil: unavailable (loopsWhy says why)
	loopsWhy string

	mu   sync.Mutex
	fwds map[string]*forward

	listNames atomic.Pointer[listNames] // EgressLists' names of the config last asked
}

// New returns the network part of a broker.
func New(d Deps) *Net {
	return &Net{Deps: d}
}

// loopbacks is the workspace-loopback manager, made on first use; nil when
// this daemon cannot make network namespaces (not root, not Linux).
func (n *Net) loopbacks() (*netns.Manager, string) {
	n.once.Do(func() {
		if runtime.GOOS != "linux" || !n.NetNS() {
			n.loopsWhy = "termd cannot make network namespaces here (it needs root on Linux)"
			return
		}
		m, err := netns.New(func() time.Duration { return n.Config().Network.WorkspaceIdle.D() })
		if err != nil {
			n.loopsWhy = err.Error()
			return
		}
		n.loops = m
	})
	return n.loops, n.loopsWhy
}

// Close closes every forward and lets go of every loopback (shutdown).
func (n *Net) Close() {
	n.mu.Lock()
	fs := make([]*forward, 0, len(n.fwds))
	for _, f := range n.fwds {
		fs = append(fs, f)
	}
	n.mu.Unlock()
	for _, f := range fs {
		f.close("termd is stopping")
	}
	if m, _ := n.loopbacks(); m != nil {
		m.Close()
	}
}

// Available refuses, before anything is prepared, a plan whose network
// (mode, a netmode.Mode) this daemon cannot give.
func (n *Net) Available(mode string) error {
	if m := netmode.Mode(mode); m.IsEgress() {
		return n.egressReady(m)
	}
	return nil
}

// Join gives an execution of principal (domain.PrincipalKey) working in cwd
// with network mode, on network workspace-loopback, a hold on its
// principal's namespace for its workspace (h, released with its sandbox;
// key names the loopback). Where there are no network namespaces it runs
// with no network instead (an empty namespace, or Landlock refusing TCP):
// fallback says so, for its receipt.
func (n *Net) Join(principal, cwd, mode string) (h *netns.Handle, key netns.Key, fallback string) {
	if netmode.Mode(mode) == netmode.WorkspaceLoopback {
		ws := n.WorkspaceOf(cwd)
		m, why := n.loopbacks()
		switch {
		case ws == "":
			fallback = "workspace loopback unavailable (the working directory is in no workspace root): the command ran with no network"
		case m == nil:
			fallback = "workspace loopback unavailable (" + why + "): the command ran with no network"
		default:
			key = netns.Key{Principal: principal, Workspace: ws}
			var err error
			if h, err = m.Acquire(key); err != nil {
				fallback = "workspace loopback unavailable (" + err.Error() + "): the command ran with no network"
				n.Log.Warn("workspace loopback", "principal", key.Principal, "workspace", ws, "error", err)
				key = netns.Key{}
			}
		}
	}
	return h, key, fallback
}

// forward is one open port forward.
type forward struct {
	n      *Net
	owner  *termdv1.Principal // who opened it
	h      *netns.Handle
	ln     net.Listener
	done   chan struct{}
	notify chan struct{} // a connection came or went (coalesced)
	once   sync.Once

	mu     sync.Mutex
	pf     *termdv1.PortForward
	conns  map[net.Conn]struct{}
	total  uint64
	in     atomic.Uint64
	out    atomic.Uint64
	reason string
}

// maxForwardConns bounds the connections one forward carries at once.
const maxForwardConns = 64

// PortForward opens a forward for caller and serves it until ctx ends or it
// is closed; send gets the forward first and again when connections come
// and go.
func (n *Net) PortForward(ctx context.Context, caller *termdv1.Principal, r *termdv1.PortForwardRequest, send func(*termdv1.PortForwardResponse) error) error {
	key, execID, sessionID, err := n.forwardTarget(caller, r.ExecutionId, r.SessionId)
	if err != nil {
		return err
	}
	if r.RemotePort == 0 || r.RemotePort > 65535 {
		return errdefs.Invalid("remote port %d: give the port the server listens on inside the workspace (1-65535)", r.RemotePort)
	}
	if r.LocalPort > 65535 {
		return errdefs.Invalid("local port %d: give a port from 1 to 65535, or 0 for a free one", r.LocalPort)
	}
	m, why := n.loopbacks()
	if m == nil {
		return errdefs.Precondition("port forwarding needs workspace loopbacks: %s", why)
	}
	h, err := m.Hold(key)
	if err != nil {
		return errdefs.Precondition("%v; start the server with --network workspace-loopback (the default for offline commands) and forward while it runs", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(r.LocalPort))))
	if err != nil {
		h.Release()
		return errdefs.Precondition("listening on 127.0.0.1:%d on the host: %v; pick another local port, or 0 for a free one", r.LocalPort, err)
	}
	f := &forward{
		n: n, owner: proto.Clone(caller).(*termdv1.Principal), h: h, ln: ln,
		done: make(chan struct{}), notify: make(chan struct{}, 1), conns: map[net.Conn]struct{}{},
		pf: &termdv1.PortForward{
			Id: "pf-" + uuid.NewString()[:13], OpenedBy: proto.Clone(caller).(*termdv1.Principal),
			Principal: key.Principal, Workspace: key.Workspace, ExecutionId: execID, SessionId: sessionID,
			LocalAddress: ln.Addr().String(), RemotePort: r.RemotePort, OpenedAt: timestamppb.Now(),
		},
	}
	if err := n.addForward(f); err != nil {
		ln.Close()
		h.Release()
		return err
	}
	n.publishForward(f, "opened", "")
	n.Log.Info("port forward opened", "forward", f.pf.Id, "by", caller.GetName(), "local", f.pf.LocalAddress, "remote_port", r.RemotePort, "principal", key.Principal, "workspace", key.Workspace)
	go f.serve(m)
	defer f.close("the client ended the call")
	if err := send(&termdv1.PortForwardResponse{Forward: f.snapshot()}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.done:
			_ = send(&termdv1.PortForwardResponse{Forward: f.snapshot()})
			return nil
		case <-f.notify:
			if err := send(&termdv1.PortForwardResponse{Forward: f.snapshot()}); err != nil {
				return err
			}
		}
	}
}

// forwardTarget resolves what a forward reaches: an execution's (or a
// session's latest) workspace loopback, which caller must own unless an
// operator.
func (n *Net) forwardTarget(caller *termdv1.Principal, execID, sessionID string) (netns.Key, string, string, error) {
	switch {
	case execID != "" && sessionID != "":
		return netns.Key{}, "", "", errdefs.Invalid("give an execution or a session, not both")
	case execID != "":
		e, err := n.Executions.Execution(caller, execID)
		if err != nil {
			return netns.Key{}, "", "", err
		}
		if !domain.OwnerOrOperator(caller, e.Owner) {
			return netns.Key{}, "", "", errdefs.Permission("execution %s belongs to %s; you may forward only into your own workspace loopback", execID, e.Owner.GetName())
		}
		if e.Key.Principal == "" {
			mode := e.Mode
			if mode == "" {
				mode = "none"
			}
			return netns.Key{}, "", "", errdefs.Precondition("execution %s ran with network %s, not on a workspace loopback; run the server with --network workspace-loopback", execID, mode)
		}
		return e.Key, e.ExecutionID, e.SessionID, nil
	case sessionID != "":
		owner, latest, ok := n.Executions.Session(caller, sessionID)
		if owner == nil {
			return netns.Key{}, "", "", errdefs.NotFound("session %s not found", sessionID)
		}
		if !domain.OwnerOrOperator(caller, owner) {
			return netns.Key{}, "", "", errdefs.Permission("session %s belongs to %s; you may forward only into your own workspace loopback", sessionID, owner.GetName())
		}
		if !ok {
			return netns.Key{}, "", "", errdefs.Precondition("session %s has run nothing on a workspace loopback; run the server with --network workspace-loopback (the default for offline commands)", sessionID)
		}
		return latest.Key, latest.ExecutionID, sessionID, nil
	}
	return netns.Key{}, "", "", errdefs.Invalid("name the execution (or session) whose workspace loopback to forward into")
}

// addForward registers f unless its opener already holds
// network.max_forwards open forwards.
func (n *Net) addForward(f *forward) error {
	max := n.Config().Network.MaxForwards
	who := domain.PrincipalKey(f.owner)
	n.mu.Lock()
	defer n.mu.Unlock()
	held := 0
	for _, o := range n.fwds {
		if domain.PrincipalKey(o.owner) == who {
			held++
		}
	}
	if held >= max {
		return errdefs.Exhausted("you hold %d port forwards open, the most network.max_forwards allows; close one (termctl port-forward --close ID)", held)
	}
	if n.fwds == nil {
		n.fwds = map[string]*forward{}
	}
	n.fwds[f.pf.Id] = f
	return nil
}

// serve accepts host connections and joins each to a connection made inside
// the workspace loopback.
func (f *forward) serve(m *netns.Manager) {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			f.close("its listener failed: " + err.Error())
			return
		}
		f.mu.Lock()
		full := len(f.conns) >= maxForwardConns || f.reason != ""
		if !full {
			f.conns[c] = struct{}{}
			f.total++
		}
		f.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		f.poke()
		go f.carry(m, c)
	}
}

func (f *forward) carry(m *netns.Manager, c net.Conn) {
	defer func() {
		c.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		f.poke()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	inner, err := m.Dial(ctx, f.h, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(f.pf.RemotePort))))
	cancel()
	if err != nil {
		return // nothing listens there (yet): the host side sees the connection closed
	}
	f.mu.Lock()
	if f.reason != "" {
		f.mu.Unlock()
		inner.Close()
		return
	}
	f.conns[inner] = struct{}{}
	f.mu.Unlock()
	defer func() {
		inner.Close()
		f.mu.Lock()
		delete(f.conns, inner)
		f.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn, n *atomic.Uint64) {
		k, _ := io.Copy(dst, src)
		n.Add(uint64(k))
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(inner, c, &f.in)
	go pipe(c, inner, &f.out)
	<-done
	<-done
}

func (f *forward) poke() {
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

// close ends the forward: its port, its connections and its hold on the
// loopback.
func (f *forward) close(reason string) {
	f.once.Do(func() {
		f.mu.Lock()
		f.reason = reason
		f.ln.Close()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.h.Release()
		n := f.n
		n.mu.Lock()
		delete(n.fwds, f.pf.Id)
		n.mu.Unlock()
		close(f.done)
		n.publishForward(f, "closed", reason)
		n.Log.Info("port forward closed", "forward", f.pf.Id, "reason", reason)
	})
}

func (f *forward) snapshot() *termdv1.PortForward {
	f.mu.Lock()
	defer f.mu.Unlock()
	pf := proto.Clone(f.pf).(*termdv1.PortForward)
	pf.Connections = f.total
	open := 0
	for range f.conns {
		open++
	}
	pf.OpenConnections = uint32((open + 1) / 2) // a carried connection is a host and an inner socket
	pf.BytesIn, pf.BytesOut = f.in.Load(), f.out.Load()
	pf.Closed = f.reason
	return pf
}

func (n *Net) publishForward(f *forward, kind, reason string) {
	pf := f.pf
	if pf.SessionId == "" {
		return
	}
	n.Bus.Publish(pf.SessionId, termdv1.EventKind_EVENT_KIND_PORT_FORWARD, func(ev *termdv1.Event) {
		ev.Payload = &termdv1.Event_PortForward{PortForward: &termdv1.PortForwardEvent{
			Kind: kind, ForwardId: pf.Id, LocalAddress: pf.LocalAddress, RemotePort: pf.RemotePort,
			Principal: pf.Principal, Workspace: pf.Workspace, By: f.owner.GetName(), Reason: reason,
		}}
	})
}

// ListPortForwards lists the open forwards caller may see (an agent: those
// it opened or that reach its own loopbacks).
func (n *Net) ListPortForwards(caller *termdv1.Principal) []*termdv1.PortForward {
	n.mu.Lock()
	fs := make([]*forward, 0, len(n.fwds))
	for _, f := range n.fwds {
		fs = append(fs, f)
	}
	n.mu.Unlock()
	var out []*termdv1.PortForward
	me := domain.PrincipalKey(caller)
	for _, f := range fs {
		if domain.Visible(caller, f.owner) || f.pf.Principal == me {
			out = append(out, f.snapshot())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OpenedAt.AsTime().Before(out[j].OpenedAt.AsTime()) })
	return out
}

// ClosePortForward closes a forward: its opener's, or anyone's for an operator.
func (n *Net) ClosePortForward(caller *termdv1.Principal, id string) (*termdv1.PortForward, error) {
	n.mu.Lock()
	f := n.fwds[id]
	n.mu.Unlock()
	if f == nil || !(domain.Visible(caller, f.owner) || f.pf.Principal == domain.PrincipalKey(caller)) {
		return nil, errdefs.NotFound("port forward %s is not open (termctl port-forward --list shows the open ones)", id)
	}
	if !domain.OwnerOrOperator(caller, f.owner) {
		return nil, errdefs.Permission("port forward %s was opened by %s; only they or an operator may close it", id, f.owner.GetName())
	}
	f.close("closed by " + caller.GetName())
	return f.snapshot(), nil
}

// LoopbackCapability is the workspace-loopback line of the daemon's status:
// whether there are any, and how many loopbacks and forwards are open.
func (n *Net) LoopbackCapability() *termdv1.Capability {
	m, why := n.loopbacks()
	if m == nil {
		return &termdv1.Capability{Name: "workspace_loopback", Detail: why + "; plans on network workspace-loopback run with no network"}
	}
	nl := len(m.List())
	n.mu.Lock()
	nf := len(n.fwds)
	n.mu.Unlock()
	return &termdv1.Capability{Name: "workspace_loopback", Available: true, Detail: fmt.Sprintf("%d workspace loopbacks, %d port forwards open", nl, nf)}
}
