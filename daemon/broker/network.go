package broker

import (
	"context"
	"fmt"
	"io"
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

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/netns"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/netmode"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Workspace loopbacks and port forwards (docs/SANDBOX.md, "Network").

// netState is the broker's network part: the workspace loopbacks and the
// open port forwards.
type netState struct {
	once     sync.Once
	loops    *netns.Manager // nil: unavailable (loopsWhy says why)
	loopsWhy string

	mu   sync.Mutex
	fwds map[string]*forward
}

// loopbacks is the workspace-loopback manager, made on first use; nil when
// this daemon cannot make network namespaces (not root, not Linux).
func (b *Broker) loopbacks() (*netns.Manager, string) {
	n := &b.net
	n.once.Do(func() {
		if runtime.GOOS != "linux" || !b.Runner.Capabilities().NetNS {
			n.loopsWhy = "termd cannot make network namespaces here (it needs root on Linux)"
			return
		}
		m, err := netns.New(func() time.Duration { return b.Config().Network.WorkspaceIdle.D() })
		if err != nil {
			n.loopsWhy = err.Error()
			return
		}
		n.loops = m
	})
	return n.loops, n.loopsWhy
}

// closeNetwork closes every forward and lets go of every loopback (shutdown).
func (b *Broker) closeNetwork() {
	b.net.mu.Lock()
	fs := make([]*forward, 0, len(b.net.fwds))
	for _, f := range b.net.fwds {
		fs = append(fs, f)
	}
	b.net.mu.Unlock()
	for _, f := range fs {
		f.close("termd is stopping")
	}
	if m, _ := b.loopbacks(); m != nil {
		m.Close()
	}
}

// egressLists are the names of the configured egress allow-lists for the
// policy (policy.Context.EgressLists); nil: none are configured (see
// daemon/egress, the proxy that serves them).
func (b *Broker) egressLists() []string { return b.egressListNames() }

// networkAvailable refuses, before anything is prepared, a plan whose
// network this daemon cannot give.
func (b *Broker) networkAvailable(d policy.Decision) error {
	if m := netmode.Mode(d.Sandbox.NetworkMode); m.IsEgress() {
		return b.egressReady(m)
	}
	return nil
}

// joinLoopback records an execution's network and, on network
// workspace-loopback, gives it a hold on its principal's namespace for its
// workspace (released with its sandbox). Where there are no network
// namespaces it runs with no network instead (an empty namespace, or
// Landlock refusing TCP), and its receipt says so. What port forwards read
// (netMode, netKey) is set under b.mu.
func (b *Broker) joinLoopback(e *execRec, d policy.Decision) {
	var (
		h        *netns.Handle
		key      netns.Key
		fallback string
	)
	if netmode.Mode(d.Sandbox.NetworkMode) == netmode.WorkspaceLoopback {
		ws := b.workspaceOf(d.Cwd)
		m, why := b.loopbacks()
		switch {
		case ws == "":
			fallback = "workspace loopback unavailable (the working directory is in no workspace root): the command ran with no network"
		case m == nil:
			fallback = "workspace loopback unavailable (" + why + "): the command ran with no network"
		default:
			key = netns.Key{Principal: e.who, Workspace: ws}
			var err error
			if h, err = m.Acquire(key); err != nil {
				fallback = "workspace loopback unavailable (" + err.Error() + "): the command ran with no network"
				b.Log.Warn("workspace loopback", "principal", key.Principal, "workspace", ws, "error", err)
				key = netns.Key{}
			}
		}
	}
	b.mu.Lock()
	e.netMode, e.netns, e.netKey, e.netFallback = d.Sandbox.NetworkMode, h, key, fallback
	b.unlock()
}

// forward is one open port forward.
type forward struct {
	b      *Broker
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
func (b *Broker) PortForward(ctx context.Context, caller *termdv1.Principal, r *termdv1.PortForwardRequest, send func(*termdv1.PortForwardResponse) error) error {
	key, execID, sessionID, err := b.forwardTarget(caller, r.ExecutionId, r.SessionId)
	if err != nil {
		return err
	}
	if r.RemotePort == 0 || r.RemotePort > 65535 {
		return errdefs.Invalid("remote port %d: give the port the server listens on inside the workspace (1-65535)", r.RemotePort)
	}
	if r.LocalPort > 65535 {
		return errdefs.Invalid("local port %d: give a port from 1 to 65535, or 0 for a free one", r.LocalPort)
	}
	m, why := b.loopbacks()
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
		b: b, owner: proto.Clone(caller).(*termdv1.Principal), h: h, ln: ln,
		done: make(chan struct{}), notify: make(chan struct{}, 1), conns: map[net.Conn]struct{}{},
		pf: &termdv1.PortForward{
			Id: "pf-" + uuid.NewString()[:13], OpenedBy: proto.Clone(caller).(*termdv1.Principal),
			Principal: key.Principal, Workspace: key.Workspace, ExecutionId: execID, SessionId: sessionID,
			LocalAddress: ln.Addr().String(), RemotePort: r.RemotePort, OpenedAt: timestamppb.Now(),
		},
	}
	if err := b.addForward(f); err != nil {
		ln.Close()
		h.Release()
		return err
	}
	b.publishForward(f, "opened", "")
	b.Log.Info("port forward opened", "forward", f.pf.Id, "by", caller.GetName(), "local", f.pf.LocalAddress, "remote_port", r.RemotePort, "principal", key.Principal, "workspace", key.Workspace)
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
func (b *Broker) forwardTarget(caller *termdv1.Principal, execID, sessionID string) (netns.Key, string, string, error) {
	b.mu.Lock()
	defer b.unlock()
	switch {
	case execID != "" && sessionID != "":
		return netns.Key{}, "", "", errdefs.Invalid("give an execution or a session, not both")
	case execID != "":
		e, err := b.execLocked(caller, execID)
		if err != nil {
			return netns.Key{}, "", "", err
		}
		if !domain.OwnerOrOperator(caller, e.plan.session.owner) {
			return netns.Key{}, "", "", errdefs.Permission("execution %s belongs to %s; you may forward only into your own workspace loopback", execID, e.plan.session.owner.GetName())
		}
		if e.netKey.Principal == "" {
			mode := e.netMode
			if mode == "" {
				mode = "none"
			}
			return netns.Key{}, "", "", errdefs.Precondition("execution %s ran with network %s, not on a workspace loopback; run the server with --network workspace-loopback", execID, mode)
		}
		return e.netKey, e.id, e.plan.session.id, nil
	case sessionID != "":
		s, ok := b.sessions[sessionID]
		if !ok || !domain.Visible(caller, s.owner) {
			return netns.Key{}, "", "", errdefs.NotFound("session %s not found", sessionID)
		}
		if !domain.OwnerOrOperator(caller, s.owner) {
			return netns.Key{}, "", "", errdefs.Permission("session %s belongs to %s; you may forward only into your own workspace loopback", sessionID, s.owner.GetName())
		}
		var latest *execRec
		for _, e := range b.execs {
			if e.plan.session == s && e.netKey.Principal != "" && (latest == nil || e.begun.After(latest.begun)) {
				latest = e
			}
		}
		if latest == nil {
			return netns.Key{}, "", "", errdefs.Precondition("session %s has run nothing on a workspace loopback; run the server with --network workspace-loopback (the default for offline commands)", sessionID)
		}
		return latest.netKey, latest.id, s.id, nil
	}
	return netns.Key{}, "", "", errdefs.Invalid("name the execution (or session) whose workspace loopback to forward into")
}

// addForward registers f unless its opener already holds
// network.max_forwards open forwards.
func (b *Broker) addForward(f *forward) error {
	max := b.Config().Network.MaxForwards
	who := domain.PrincipalKey(f.owner)
	b.net.mu.Lock()
	defer b.net.mu.Unlock()
	n := 0
	for _, o := range b.net.fwds {
		if domain.PrincipalKey(o.owner) == who {
			n++
		}
	}
	if n >= max {
		return errdefs.Exhausted("you hold %d port forwards open, the most network.max_forwards allows; close one (termctl port-forward --close ID)", n)
	}
	if b.net.fwds == nil {
		b.net.fwds = map[string]*forward{}
	}
	b.net.fwds[f.pf.Id] = f
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
		b := f.b
		b.net.mu.Lock()
		delete(b.net.fwds, f.pf.Id)
		b.net.mu.Unlock()
		close(f.done)
		b.publishForward(f, "closed", reason)
		b.Log.Info("port forward closed", "forward", f.pf.Id, "reason", reason)
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

func (b *Broker) publishForward(f *forward, kind, reason string) {
	pf := f.pf
	if pf.SessionId == "" {
		return
	}
	b.Bus.Publish(pf.SessionId, termdv1.EventKind_EVENT_KIND_PORT_FORWARD, func(ev *termdv1.Event) {
		ev.Payload = &termdv1.Event_PortForward{PortForward: &termdv1.PortForwardEvent{
			Kind: kind, ForwardId: pf.Id, LocalAddress: pf.LocalAddress, RemotePort: pf.RemotePort,
			Principal: pf.Principal, Workspace: pf.Workspace, By: f.owner.GetName(), Reason: reason,
		}}
	})
}

// ListPortForwards lists the open forwards caller may see (an agent: those
// it opened or that reach its own loopbacks).
func (b *Broker) ListPortForwards(caller *termdv1.Principal) []*termdv1.PortForward {
	b.net.mu.Lock()
	fs := make([]*forward, 0, len(b.net.fwds))
	for _, f := range b.net.fwds {
		fs = append(fs, f)
	}
	b.net.mu.Unlock()
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
func (b *Broker) ClosePortForward(caller *termdv1.Principal, id string) (*termdv1.PortForward, error) {
	b.net.mu.Lock()
	f := b.net.fwds[id]
	b.net.mu.Unlock()
	if f == nil || !(domain.Visible(caller, f.owner) || f.pf.Principal == domain.PrincipalKey(caller)) {
		return nil, errdefs.NotFound("port forward %s is not open (termctl port-forward --list shows the open ones)", id)
	}
	if !domain.OwnerOrOperator(caller, f.owner) {
		return nil, errdefs.Permission("port forward %s was opened by %s; only they or an operator may close it", id, f.owner.GetName())
	}
	f.close("closed by " + caller.GetName())
	return f.snapshot(), nil
}

// loopbackCapability is the workspace-loopback line of the daemon's status:
// whether there are any, and how many loopbacks and forwards are open.
func (b *Broker) loopbackCapability() *termdv1.Capability {
	m, why := b.loopbacks()
	if m == nil {
		return &termdv1.Capability{Name: "workspace_loopback", Detail: why + "; plans on network workspace-loopback run with no network"}
	}
	n := len(m.List())
	b.net.mu.Lock()
	nf := len(b.net.fwds)
	b.net.mu.Unlock()
	return &termdv1.Capability{Name: "workspace_loopback", Available: true, Detail: fmt.Sprintf("%d workspace loopbacks, %d port forwards open", n, nf)}
}
