package broker

import (
	"os"

	"github.com/termd/termd/daemon/egress"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/internal/netmode"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
	"golang.org/x/sys/unix"
)

// egressRun is the allow-list proxy of one execution with network
// egress:NAME (docs/SANDBOX.md, Network). The execution runs in a network
// namespace of its own with loopback up and no route out; the proxy's
// listener was made inside it (127.0.0.1:PORT, the only thing it can reach)
// and is served from the daemon, which connects out from the host's
// namespace to what the allow-list names. The namespace is not the
// workspace loopback: offline executions there, which run without approval,
// never see the proxy.
type egressRun struct {
	list  string
	proxy *egress.Proxy
	nsfd  int
	env   map[string]string
	// summary is the account once the proxy is stopped (for the receipt).
	summary *receipt.Egress
}

// egressListNames are the configured allow-lists' names, for the policy.
// nil when this daemon cannot run the proxy (no network namespaces, not
// root): the policy then gives package fetches the host network (asked)
// instead of egress:registries, and an egress:NAME plan is refused at its
// start with the reason (egressReady).
func (b *Broker) egressListNames() []string {
	if !b.Runner.Capabilities().NetNS || os.Geteuid() != 0 {
		return nil
	}
	lists, err := b.Config().EgressLists()
	if err != nil {
		return []string{}
	}
	names := make([]string, 0, len(lists))
	for n := range lists {
		names = append(names, n)
	}
	return names
}

// egressReady says why this daemon cannot run a plan with network mode m
// ("" when it can).
func (b *Broker) egressReady(m netmode.Mode) error {
	name := m.EgressName()
	lists, err := b.Config().EgressLists()
	if err != nil {
		return errdefs.Precondition("network %s: %v", m, err)
	}
	if lists[name] == nil {
		return errdefs.Precondition("network %s names no egress allow-list in termd's config; replan with a configured one (termd doctor lists them)", m)
	}
	if !b.Runner.Capabilities().NetNS || os.Geteuid() != 0 {
		return errdefs.Precondition("network %s needs network namespaces (termd running as root) for its proxy; replan with network none, workspace-loopback or host", m)
	}
	return nil
}

// startEgress starts e's proxy for network mode m in a new network
// namespace; e.egress holds it (stopped by stopEgress, from
// releaseSandbox).
func (b *Broker) startEgress(e *execRec, m netmode.Mode) error {
	if err := b.egressReady(m); err != nil {
		return err
	}
	cfg := b.Config()
	lists, _ := cfg.EgressLists()
	hosts, err := cfg.EgressHosts()
	if err != nil {
		return errdefs.Precondition("%v", err)
	}
	name := m.EgressName()
	fd, err := egress.NewNetns()
	if err != nil {
		return errdefs.Internal("network %s: %v", m, err)
	}
	ln, err := egress.ListenInNetns(fd, "127.0.0.1:0")
	if err != nil {
		unix.Close(fd)
		return errdefs.Internal("network %s: %v", m, err)
	}
	run := &egressRun{list: name, nsfd: fd, env: egress.Env(ln.Addr().String())}
	run.proxy = egress.New(egress.Options{
		List: lists[name], Hosts: hosts, MaxConns: cfg.Egress.MaxConnections,
		OnRefuse: func(r egress.Refusal) { b.publishEgressRefused(e, name, r) },
	})
	go func() { _ = run.proxy.Serve(ln) }()
	e.egress = run
	return nil
}

// netNSFD is the namespace the execution joins: its egress namespace, or
// its workspace loopback's (-1: none).
func (e *execRec) netNSFD() int {
	if e.egress != nil {
		return e.egress.nsfd
	}
	return e.netns.Fd()
}

// stopEgress ends e's proxy (closing its connections), keeps its account
// for the receipt and lets go of the namespace. Safe to call more than once.
func (e *execRec) stopEgress() {
	run := e.egress
	if run == nil || run.summary != nil {
		return
	}
	run.proxy.Close()
	run.summary = egressReceipt(run.proxy.Summary())
	if run.nsfd >= 0 {
		unix.Close(run.nsfd)
		run.nsfd = -1
	}
}

// receiptEgress is the receipt's egress member (nil for other networks).
func (e *execRec) receiptEgress() *receipt.Egress {
	if e.egress == nil {
		return nil
	}
	e.stopEgress()
	return e.egress.summary
}

func egressReceipt(s egress.Summary) *receipt.Egress {
	out := &receipt.Egress{AllowList: s.AllowList, Destinations: []receipt.EgressDestination{}, Refused: []receipt.EgressRefusal{}, Dropped: s.Dropped}
	for _, d := range s.Destinations {
		out.Destinations = append(out.Destinations, receipt.EgressDestination{Host: d.Host, Port: int(d.Port), Address: d.Address, Connections: d.Connections, BytesUp: d.BytesUp, BytesDown: d.BytesDown})
	}
	for _, r := range s.Refused {
		out.Refused = append(out.Refused, receipt.EgressRefusal{Host: r.Host, Port: int(r.Port), Reason: r.Reason, Detail: r.Detail, Count: r.Count})
	}
	return out
}

// publishEgressRefused tells the session's watchers, as it happens, that the
// proxy refused a destination (once per host, port and reason), so an agent
// learns what to ask for.
func (b *Broker) publishEgressRefused(e *execRec, list string, r egress.Refusal) {
	b.Bus.Publish(e.plan.session.id, termdv1.EventKind_EVENT_KIND_EGRESS_REFUSED, func(ev *termdv1.Event) {
		ev.Payload = &termdv1.Event_EgressRefused{EgressRefused: &termdv1.EgressRefusal{
			ExecutionId: e.id, PlanId: e.plan.p.Id, AllowList: list,
			Host: r.Host, Port: uint32(r.Port), Reason: r.Reason, Detail: r.Detail,
		}}
	})
}
