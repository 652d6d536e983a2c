package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// host is one daemon the gateway serves and what the gateway last saw of it.
// The state is a cache: probes and streams refresh it; nothing in it is
// needed to serve a request, so two gateways can serve one fleet.
type host struct {
	Host
	// probe is a viewer connection used only for GetStatus.
	probe *client.Client

	mu    sync.Mutex
	state hostState
}

// hostState is a host's reachability as the gateway last saw it.
type hostState struct {
	Up        bool
	Since     time.Time // when it last changed (or was first seen)
	Checked   time.Time // the last probe
	Error     string    // why it is down
	Version   string
	StartedAt time.Time // the daemon's start: its event sequence's epoch
}

// observe records a probe's or a call's outcome (st nil: a call that
// answered, which says nothing of the version).
func (h *host) observe(st *termdv1.GetStatusResponse, err error) hostState {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	up := err == nil
	if up != h.state.Up || h.state.Since.IsZero() {
		h.state.Since = now
	}
	h.state.Up, h.state.Checked = up, now
	if err != nil {
		h.state.Error = err.Error()
	} else {
		h.state.Error = ""
		if st != nil {
			h.state.Version = st.GetVersion()
			h.state.StartedAt = st.GetStartedAt().AsTime()
		}
	}
	return h.state
}

func (h *host) current() hostState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

// check probes the host now.
func (h *host) check(ctx context.Context) hostState {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := h.probe.Daemon.GetStatus(ctx, &termdv1.GetStatusRequest{})
	return h.observe(st, err)
}

// setHosts builds the host list from Options (Hosts, or Socket as "local")
// and picks the default host.
func (g *Gateway) setHosts() error {
	hosts := g.opts.Hosts
	if len(hosts) == 0 {
		hosts = []Host{{Name: DefaultHostName, Target: g.opts.Socket}}
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if err := CheckHostName(h.Name); err != nil {
			return err
		}
		if seen[h.Name] {
			return fmt.Errorf("host name %q is given twice", h.Name)
		}
		seen[h.Name] = true
		g.fleet = append(g.fleet, &host{Host: h})
	}
	g.def = g.fleet[0]
	if d := g.opts.DefaultHost; d != "" {
		g.def = g.hostNamed(d)
		if g.def == nil {
			return fmt.Errorf("default host %q is not one of the hosts (%s)", d, strings.Join(g.hostNames(), ", "))
		}
	}
	return nil
}

func (g *Gateway) hostNamed(name string) *host {
	for _, h := range g.fleet {
		if h.Name == name {
			return h
		}
	}
	return nil
}

func (g *Gateway) hostNames() []string {
	var out []string
	for _, h := range g.fleet {
		out = append(out, h.Name)
	}
	return out
}

// dialHost connects to a host's socket, or to its mutual-TLS listener
// with the gateway's client certificate (termd maps it to the gateway's
// principal; with gateway: true in its listen_tls.clients entry the
// person a token names is recorded beside it).
func dialHost(h Host, o client.Options) (*client.Client, error) {
	if h.IsTCP() {
		o.TLS = &client.TLS{CertFile: h.TLS.Cert, KeyFile: h.TLS.Key, CAFile: h.TLS.CA, ServerName: h.TLS.ServerName}
	}
	c, err := client.Dial(h.Target, o)
	if err != nil {
		return nil, fmt.Errorf("host %q: %w", h.Name, err)
	}
	return c, nil
}

// startMonitors dials each host's probe connection and probes it every
// HealthInterval until Close.
func (g *Gateway) startMonitors() error {
	every := g.opts.HealthInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	for _, h := range g.fleet {
		c, err := dialHost(h.Host, client.Options{Via: "gateway", Role: termdv1.Role_ROLE_VIEWER})
		if err != nil {
			return err
		}
		h.probe = c
		h.observe(nil, fmt.Errorf("not checked yet"))
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			prev := false
			for {
				st := h.check(ctx)
				if ctx.Err() != nil {
					return
				}
				if st.Up != prev || st.Since.Equal(st.Checked) {
					g.log.Info("host", "name", h.Name, "target", h.Target, "up", st.Up, "error", st.Error)
				}
				prev = st.Up
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	return nil
}

// hostsPrefix starts every per-host route: /v1/hosts/NAME/REST is /v1/REST
// on host NAME.
const hostsPrefix = "/v1/hosts/"

// route picks the host a request is for and the path on that host's routes:
// /v1/hosts/NAME/... goes to NAME as /v1/...; any other route to the default
// host. An unknown host is answered 404 here.
func (g *Gateway) route(w http.ResponseWriter, r *http.Request, s *scope) (*hostConn, *http.Request, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, hostsPrefix)
	if !ok {
		return s.conns[g.def.Name], r, true
	}
	name, sub, _ := strings.Cut(rest, "/")
	h := g.hostNamed(name)
	if h == nil {
		writeError(w, http.StatusNotFound, "no host "+quoteHost(name)+" in this gateway's fleet; GET /v1/hosts lists them")
		return nil, nil, false
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/v1/" + sub
	r2.URL.RawPath = ""
	if raw, ok := strings.CutPrefix(r.URL.EscapedPath(), hostsPrefix+name+"/"); ok && r.URL.RawPath != "" {
		r2.URL.RawPath = "/v1/" + raw
	}
	return s.conns[h.Name], r2, true
}

// boolParam reads a query flag (1/true, 0/false, or absent: false); a
// bad value is answered 400 with msg.
func boolParam(w http.ResponseWriter, q url.Values, name, msg string) (v, ok bool) {
	switch q.Get(name) {
	case "", "0", "false":
		return false, true
	case "1", "true":
		return true, true
	}
	writeError(w, http.StatusBadRequest, msg)
	return false, false
}

// isEventsPath: the routes a browser's EventSource opens with a ticket.
func isEventsPath(p string) bool {
	if p == "/v1/fleet/events" || p == "/v1/events" || terminalStreamID(p) != "" {
		return true
	}
	rest, ok := strings.CutPrefix(p, hostsPrefix)
	if !ok {
		return false
	}
	_, sub, _ := strings.Cut(rest, "/")
	return sub == "events" || terminalStreamID("/v1/"+sub) != ""
}

// serveFleet answers the routes about the whole fleet.
func (g *Gateway) serveFleet(w http.ResponseWriter, r *http.Request, s *scope) {
	switch r.URL.Path {
	case "/v1/hosts":
		g.serveHosts(w, r)
	case "/v1/fleet/plans":
		g.serveFleetPlans(w, r, s)
	case "/v1/fleet/events":
		g.serveFleetEvents(w, r, s)
	default:
		writeError(w, http.StatusNotFound, "no such fleet route: use GET /v1/hosts, /v1/fleet/plans or /v1/fleet/events")
	}
}

// hostJSON is a host as /v1/hosts and /v1/fleet/plans show it.
func hostJSON(h *host, st hostState, def bool) map[string]any {
	m := map[string]any{
		"name":      h.Name,
		"address":   h.Target,
		"transport": map[bool]string{true: "mtls", false: "unix"}[h.IsTCP()],
		"default":   def,
		"state":     map[bool]string{true: "up", false: "down"}[st.Up],
		"since":     st.Since.UTC().Format(time.RFC3339Nano),
		"checked":   st.Checked.UTC().Format(time.RFC3339Nano),
	}
	if st.Up {
		m["version"] = st.Version
		m["started_at"] = st.StartedAt.UTC().Format(time.RFC3339Nano)
	} else {
		m["error"] = st.Error
	}
	return m
}

// selectedHosts checks that a fleet route is a GET and reads ?host=
// (repeated, or comma-separated; none: every host).
func (g *Gateway) selectedHosts(w http.ResponseWriter, r *http.Request) ([]*host, bool) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "use GET")
		return nil, false
	}
	var names []string
	for _, v := range r.URL.Query()["host"] {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return g.fleet, true
	}
	var out []*host
	for _, n := range names {
		h := g.hostNamed(n)
		if h == nil {
			writeError(w, http.StatusBadRequest, "host="+quoteHost(n)+" is not in this gateway's fleet ("+strings.Join(g.hostNames(), ", ")+")")
			return nil, false
		}
		out = append(out, h)
	}
	return out, true
}

// serveHosts: GET /v1/hosts lists the hosts, each probed now.
func (g *Gateway) serveHosts(w http.ResponseWriter, r *http.Request) {
	hs, ok := g.selectedHosts(w, r)
	if !ok {
		return
	}
	states := make([]hostState, len(hs))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[i] = h.check(r.Context())
		}()
	}
	wg.Wait()
	out := []map[string]any{}
	for i, h := range hs {
		out = append(out, hostJSON(h, states[i], h == g.def))
	}
	writeJSON(w, http.StatusOK, map[string]any{"hosts": out})
}

// serveFleetPlans: GET /v1/fleet/plans is the approval queue of the whole
// fleet: the plans awaiting approval on every selected host, each with its
// host. A host that does not answer is listed in hosts with its error; the
// others' plans are still returned.
func (g *Gateway) serveFleetPlans(w http.ResponseWriter, r *http.Request, s *scope) {
	hs, ok := g.selectedHosts(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	req := &termdv1.ListPlansRequest{States: []termdv1.PlanState{termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL}}
	if req.ApprovableOnly, ok = boolParam(w, q, "approvable_only", "approvable_only must be true or false"); !ok {
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "limit must be a count of plans per host (0: the daemon's default)")
			return
		}
		req.Limit = int32(min(n, 1<<20))
	}
	type result struct {
		plans []*termdv1.Plan
		err   error
	}
	res := make([]result, len(hs))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
			defer cancel()
			lr, err := s.conns[h.Name].client.Plans.ListPlans(ctx, req)
			res[i] = result{lr.GetPlans(), err}
		}()
	}
	wg.Wait()
	plans := []any{}
	hosts := []map[string]any{}
	for i, h := range hs {
		var st hostState
		switch {
		case res[i].err == nil:
			st = h.observe(nil, nil)
		case client.Code(res[i].err) == codes.Unavailable: // the host is down
			st = h.observe(nil, res[i].err)
		default: // up, but it refused (the token's role, a bad argument)
			st = h.current()
		}
		hm := hostJSON(h, st, h == g.def)
		if res[i].err != nil {
			hm["error"] = res[i].err.Error()
			hm["status"] = codeName(client.Code(res[i].err))
		}
		hm["plans"] = len(res[i].plans)
		hosts = append(hosts, hm)
		for _, p := range res[i].plans {
			m, err := withHost(p, h.Name)
			if err != nil {
				writeError(w, http.StatusInternalServerError, err.Error())
				return
			}
			plans = append(plans, m)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"plans": plans, "hosts": hosts})
}
