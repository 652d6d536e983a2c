package wsnet

import (
	"maps"
	"os"
	"slices"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/egress"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/internal/netmode"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
	"golang.org/x/sys/unix"
)

// Egress is the allow-list proxy of one execution with network
// egress:NAME (docs/SANDBOX.md, Network). The execution runs in a network
// namespace of its own with loopback up and no route out; the proxy's
// listener was made inside it (127.0.0.1:PORT, the only thing it can reach)
// and is served from the daemon, which connects out from the host's
// namespace to what the allow-list names. The namespace is not the
// workspace loopback: offline executions there, which run without approval,
// never see the proxy.
type Egress struct {
	list  string
	proxy *egress.Proxy
	nsfd  int
	env   map[string]string
	// summary is the account once the proxy is stopped (for the receipt).
	summary *receipt.Egress
}

// EgressLists are the configured allow-lists' names, for the policy
// (policy.Context.EgressLists; see daemon/egress, the proxy that serves
// them). nil when this daemon cannot run the proxy (no network namespaces, not
// root): the policy then gives package fetches the host network (asked)
// instead of egress:registries, and an egress:NAME plan is refused at its
// start with the reason (egressReady).
// The names are those of the config in use, parsed once per config (each
// plan's policy asks twice: at the plan and at its start), sorted; a
// reload puts a new config in place, whose names are read at its first ask.
func (n *Net) EgressLists() []string {
	if !n.NetNS() || os.Geteuid() != 0 {
		return nil
	}
	cfg := n.Config()
	if m := n.listNames.Load(); m != nil && m.cfg == cfg {
		return m.names
	}
	names := []string{}
	if lists, err := cfg.EgressLists(); err == nil {
		names = slices.Sorted(maps.Keys(lists))
	}
	names = slices.Clip(names) // shared: an append copies
	n.listNames.Store(&listNames{cfg: cfg, names: names})
	return names
}

// listNames are EgressLists' names for one config.
type listNames struct {
	cfg   *config.Config
	names []string
}

// egressReady says why this daemon cannot run a plan with network mode m
// ("" when it can).
func (n *Net) egressReady(m netmode.Mode) error {
	name := m.EgressName()
	lists, err := n.Config().EgressLists()
	if err != nil {
		return errdefs.Precondition("network %s: %v", m, err)
	}
	if lists[name] == nil {
		return errdefs.Precondition("network %s names no egress allow-list in termd's config; replan with a configured one (termd doctor lists them)", m)
	}
	if !n.NetNS() || os.Geteuid() != 0 {
		return errdefs.Precondition("network %s needs network namespaces (termd running as root) for its proxy; replan with network none, workspace-loopback or host", m)
	}
	return nil
}

// EgressFor names the execution an egress proxy serves, for the events
// that tell its session's watchers what the proxy refused.
type EgressFor struct {
	ExecutionID, PlanID, SessionID string
}

// StartEgress starts an execution's proxy for network mode m in a new
// network namespace; the execution holds it until Stop (when its sandbox is
// released).
func (n *Net) StartEgress(m netmode.Mode, e EgressFor) (*Egress, error) {
	if err := n.egressReady(m); err != nil {
		return nil, err
	}
	cfg := n.Config()
	lists, _ := cfg.EgressLists()
	hosts, err := cfg.EgressHosts()
	if err != nil {
		return nil, errdefs.Precondition("%v", err)
	}
	name := m.EgressName()
	fd, err := egress.NewNetns()
	if err != nil {
		return nil, errdefs.Internal("network %s: %v", m, err)
	}
	ln, err := egress.ListenInNetns(fd, "127.0.0.1:0")
	if err != nil {
		unix.Close(fd)
		return nil, errdefs.Internal("network %s: %v", m, err)
	}
	run := &Egress{list: name, nsfd: fd, env: egress.Env(ln.Addr().String())}
	run.proxy = egress.New(egress.Options{
		List: lists[name], Hosts: hosts, MaxConns: cfg.Egress.MaxConnections,
		OnRefuse: func(r receipt.EgressRefusal) { n.publishEgressRefused(e, name, r) },
	})
	go func() { _ = run.proxy.Serve(ln) }()
	return run, nil
}

// Env is the environment that points the execution's tools at its proxy.
func (run *Egress) Env() map[string]string { return run.env }

// NSFD is the descriptor of the execution's network namespace, the one its
// proxy listens in (-1 once stopped).
func (run *Egress) NSFD() int { return run.nsfd }

// Stop ends the proxy (closing its connections), keeps its account for the
// receipt and lets go of the namespace. Safe to call more than once, and on
// nil (no proxy).
func (run *Egress) Stop() {
	if run == nil || run.summary != nil {
		return
	}
	run.proxy.Close()
	run.summary = run.proxy.Summary()
	if run.nsfd >= 0 {
		unix.Close(run.nsfd)
		run.nsfd = -1
	}
}

// Receipt is the receipt's egress member, the proxy stopped first (nil for
// other networks: no proxy).
func (run *Egress) Receipt() *receipt.Egress {
	if run == nil {
		return nil
	}
	run.Stop()
	return run.summary
}

// publishEgressRefused tells the session's watchers, as it happens, that the
// proxy refused a destination (once per host, port and reason), so an agent
// learns what to ask for.
func (n *Net) publishEgressRefused(e EgressFor, list string, r receipt.EgressRefusal) {
	n.Bus.Publish(e.SessionID, termdv1.EventKind_EVENT_KIND_EGRESS_REFUSED, func(ev *termdv1.Event) {
		ev.Payload = &termdv1.Event_EgressRefused{EgressRefused: &termdv1.EgressRefusal{
			ExecutionId: e.ExecutionID, PlanId: e.PlanID, AllowList: list,
			Host: r.Host, Port: uint32(r.Port), Reason: r.Reason, Detail: r.Detail,
		}}
	})
}
