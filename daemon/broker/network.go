package broker

import (
	"context"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/broker/wsnet"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/netmode"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The broker's side of the workspace network (daemon/broker/wsnet): what an
// execution records of its network, and the executions and sessions a port
// forward reaches.

// joinNetwork gives the execution its network (executions.Start.Network):
// the egress proxy of a network egress:NAME execution (e.egress, stopped
// from releaseSandbox), and, on network workspace-loopback, its hold on its
// principal's namespace for its workspace (wsnet.Net.Join). What port
// forwards read (netMode, netKey) is set under b.mu.
func (b *Broker) joinNetwork(e *execRec, d policy.Decision) (executions.Network, error) {
	if err := b.net.Available(d.Sandbox.NetworkMode); err != nil {
		return executions.Network{}, err
	}
	if m := netmode.Mode(d.Sandbox.NetworkMode); m.IsEgress() {
		var err error
		if e.egress, err = b.net.StartEgress(m, wsnet.EgressFor{ExecutionID: e.id, PlanID: e.plan.p.Id, SessionID: e.plan.session.ID}); err != nil {
			return executions.Network{}, err
		}
	}
	h, key, fallback := b.net.Join(e.who, d.Cwd, d.Sandbox.NetworkMode)
	b.mu.Lock()
	e.netMode, e.netns, e.netKey, e.netFallback = d.Sandbox.NetworkMode, h, key, fallback
	b.unlock()
	// The namespace it joins: its egress namespace, or its workspace loopback's (-1: none).
	nw := executions.Network{Loopback: e.netns != nil, Egress: e.egress != nil, NSFD: e.netns.Fd(), Fallback: e.netFallback}
	if e.egress != nil {
		nw.EgressEnv, nw.NSFD = e.egress.Env(), e.egress.NSFD()
	}
	return nw, nil
}

// PortForward opens a forward for caller and serves it until ctx ends or it
// is closed; send gets the forward first and again when connections come
// and go.
func (b *Broker) PortForward(ctx context.Context, caller *termdv1.Principal, r *termdv1.PortForwardRequest, send func(*termdv1.PortForwardResponse) error) error {
	return b.net.PortForward(ctx, caller, r, send)
}

// ListPortForwards lists the open forwards caller may see.
func (b *Broker) ListPortForwards(caller *termdv1.Principal) []*termdv1.PortForward {
	return b.net.ListPortForwards(caller)
}

// ClosePortForward closes a forward: its opener's, or anyone's for an operator.
func (b *Broker) ClosePortForward(caller *termdv1.Principal, id string) (*termdv1.PortForward, error) {
	return b.net.ClosePortForward(caller, id)
}

// forwardTargets is the broker as wsnet.Executions.
type forwardTargets struct{ b *Broker }

func loopbackOf(e *execRec) wsnet.Loopback {
	return wsnet.Loopback{ExecutionID: e.id, SessionID: e.plan.session.ID, Owner: e.plan.session.Owner, Mode: e.netMode, Key: e.netKey}
}

func (t forwardTargets) Execution(caller *termdv1.Principal, id string) (wsnet.Loopback, error) {
	b := t.b
	b.mu.Lock()
	defer b.unlock()
	e, err := b.execLocked(caller, id)
	if err != nil {
		return wsnet.Loopback{}, err
	}
	return loopbackOf(e), nil
}

func (t forwardTargets) Session(caller *termdv1.Principal, id string) (*termdv1.Principal, wsnet.Loopback, bool) {
	b := t.b
	b.mu.Lock()
	defer b.unlock()
	s, ok := b.sessions[id]
	if !ok || !domain.Visible(caller, s.Owner) {
		return nil, wsnet.Loopback{}, false
	}
	var latest *execRec
	for _, e := range b.execs {
		if e.plan.session == s && e.netKey.Principal != "" && (latest == nil || e.begun.After(latest.begun)) {
			latest = e
		}
	}
	if latest == nil {
		return s.Owner, wsnet.Loopback{}, false
	}
	return s.Owner, loopbackOf(latest), true
}
