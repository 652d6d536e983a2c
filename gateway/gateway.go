// Package gateway is termd's HTTP front: the REST mapping generated from the
// proto's HTTP annotations, a hand-written Server-Sent Events endpoint for
// event streams, and the embedded web console. It holds no domain logic:
// every call goes to a daemon (over its unix socket or its mutual-TLS
// listener), on a connection lowered to the role of the bearer token that
// made the request. One gateway may serve several daemons (hosts): each
// one's routes under /v1/hosts/NAME/, the fleet's approval queue and merged
// events under /v1/fleet/ (fleet.go, hosts.go, fleetsse.go).
package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/termd/termd/client"
	gw "github.com/termd/termd/gateway/internal/gen/termd/v1"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/recipe"
)

// Options configure a Gateway.
type Options struct {
	// Socket is the daemon's unix socket when Hosts is empty: the gateway
	// then serves that one daemon as host "local".
	Socket string
	// Hosts are the daemons served (FleetHosts builds them from --daemon
	// and --fleet). Unprefixed /v1/ routes go to DefaultHost (default: the
	// first host).
	Hosts       []Host
	DefaultHost string
	// HealthInterval is how often each host's state is probed (default 5s).
	HealthInterval time.Duration
	// Listen is the address the server is reachable at (host:port); it
	// decides the accepted Host and Origin values.
	Listen string
	// TLS says the server is served over HTTPS (changes the accepted origins).
	TLS bool
	// Tokens are the bearer tokens accepted; at least one is required.
	Tokens []Token
	// AllowedHosts and AllowedOrigins extend the defaults derived from Listen.
	AllowedHosts   []string
	AllowedOrigins []string
	// RatePerSecond and RateBurst bound requests per client (defaults 20/s, burst 100).
	RatePerSecond float64
	RateBurst     int
	// BodyLimit bounds request bodies (default 1 MiB).
	BodyLimit int64
	// Heartbeat is the interval of SSE keepalive comments (default 15s).
	Heartbeat time.Duration
	// TicketTTL is how long an SSE ticket stays valid (default 30s).
	TicketTTL time.Duration
	// Logger receives one line per request (default: slog.Default()).
	Logger *slog.Logger
}

// Gateway is an http.Handler serving the API, event streams and console.
type Gateway struct {
	opts    Options
	scopes  []*scope
	fleet   []*host
	def     *host
	stop    context.CancelFunc
	hosts   []string
	origins []string
	limit   *limiter
	tickets *tickets
	log     *slog.Logger
	static  http.Handler
	streams atomic.Int64
}

// ActiveStreams is the number of daemon event streams the gateway holds open.
func (g *Gateway) ActiveStreams() int64 { return g.streams.Load() }

// scope is one token with its own connection and REST mux on every host.
type scope struct {
	token  Token
	digest [32]byte
	conns  map[string]*hostConn
}

// hostConn is one token's connection to one host.
type hostConn struct {
	client *client.Client
	mux    *runtime.ServeMux
}

// jsonpb writes the API's JSON convention (docs/ARCHITECTURE.md, "JSON"):
// snake_case field names (the proto names, as termctl -o json and the MCP
// tools write them); requests may use either spelling.
var jsonpb = &runtime.JSONPb{
	MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true},
	UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
}

// New dials the daemon once per token and registers the generated REST
// handlers on each connection. Close releases the connections.
func New(ctx context.Context, o Options) (*Gateway, error) {
	if len(o.Tokens) == 0 {
		return nil, errors.New("no bearer token configured: the gateway refuses to run open")
	}
	seen := map[string]bool{}
	for _, t := range o.Tokens {
		if err := CheckToken(t.Value); err != nil {
			return nil, fmt.Errorf("token %q: %w", t.Name, err)
		}
		if t.Name == "" || seen["n:"+t.Name] || seen["v:"+t.Value] {
			return nil, fmt.Errorf("token %q: names and tokens must be non-empty and unique", t.Name)
		}
		seen["n:"+t.Name], seen["v:"+t.Value] = true, true
		if t.Role == termdv1.Role_ROLE_UNSPECIFIED {
			return nil, fmt.Errorf("token %q has no role", t.Name)
		}
	}
	if o.RatePerSecond <= 0 {
		o.RatePerSecond = 20
	}
	if o.RateBurst <= 0 {
		o.RateBurst = 100
	}
	if o.BodyLimit <= 0 {
		o.BodyLimit = 1 << 20
	}
	o.Heartbeat = heartbeatOr(o.Heartbeat)
	if o.TicketTTL <= 0 {
		o.TicketTTL = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	g := &Gateway{
		opts:    o,
		hosts:   allowedHostsFor(o.Listen, o.AllowedHosts),
		limit:   newLimiter(o.RatePerSecond, o.RateBurst),
		tickets: newTickets(o.TicketTTL),
		log:     o.Logger,
		static:  consoleHandler(),
	}
	scheme := "http://"
	if o.TLS {
		scheme = "https://"
	}
	for _, h := range g.hosts {
		g.origins = append(g.origins, scheme+h)
	}
	for _, or := range o.AllowedOrigins {
		g.origins = append(g.origins, strings.ToLower(strings.TrimSuffix(or, "/")))
	}
	if err := g.setHosts(); err != nil {
		return nil, err
	}
	for _, t := range o.Tokens {
		s := &scope{token: t, digest: sha256.Sum256([]byte(t.Value)), conns: map[string]*hostConn{}}
		g.scopes = append(g.scopes, s)
		for _, h := range g.fleet {
			hc, err := newHostConn(ctx, h.Host, t)
			if err != nil {
				g.Close()
				return nil, err
			}
			s.conns[h.Name] = hc
		}
	}
	if err := g.startMonitors(); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func newHostConn(ctx context.Context, h Host, t Token) (*hostConn, error) {
	c, err := dialHost(h, client.Options{Via: "gateway", Role: t.Role, Name: "token:" + t.Name})
	if err != nil {
		return nil, err
	}
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, jsonpb),
		// Nothing from the HTTP request becomes gRPC metadata: a browser must
		// not be able to send x-termd-role or x-termd-name, nor have its
		// Authorization header forwarded to the daemon.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithDisableHTTPMethodOverride(),
		runtime.WithErrorHandler(apiError),
		runtime.WithRoutingErrorHandler(routingError),
		runtime.WithStreamErrorHandler(streamError),
	)
	conn := c.Conn()
	regs := []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		gw.RegisterDaemonServiceHandler,
		gw.RegisterSessionServiceHandler,
		gw.RegisterPlanServiceHandler,
		gw.RegisterExecutionServiceHandler,
		gw.RegisterReceiptServiceHandler,
		gw.RegisterPolicyServiceHandler,
		gw.RegisterAdviserServiceHandler,
		gw.RegisterWorkspaceServiceHandler,
		gw.RegisterGrantServiceHandler,
		gw.RegisterRecipeServiceHandler,
		gw.RegisterTerminalServiceHandler,
		gw.RegisterPortForwardServiceHandler,
	}
	for _, reg := range regs {
		if err := reg(ctx, mux, conn); err != nil {
			c.Close()
			return nil, err
		}
	}
	return &hostConn{client: c, mux: mux}, nil
}

// Close stops the host probes and closes the daemon connections.
func (g *Gateway) Close() {
	if g.stop != nil {
		g.stop()
	}
	for _, s := range g.scopes {
		for _, hc := range s.conns {
			hc.client.Close()
		}
	}
	for _, h := range g.fleet {
		if h.probe != nil {
			h.probe.Close()
		}
	}
}

// Client returns the named token's client of the default host (used by tests).
func (g *Gateway) Client(name string) *client.Client {
	for _, s := range g.scopes {
		if s.token.Name == name {
			return s.conns[g.def.Name].client
		}
	}
	return nil
}

// lookup finds the scope of a presented token. Every scope is compared, in
// constant time over equal-length digests, so timing reveals nothing.
func (g *Gateway) lookup(presented string) *scope {
	if presented == "" {
		return nil
	}
	d := sha256.Sum256([]byte(presented))
	var found *scope
	for _, s := range g.scopes {
		if subtle.ConstantTimeCompare(d[:], s.digest[:]) == 1 {
			found = s
		}
	}
	return found
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const p = "bearer "
	if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
		return strings.TrimSpace(h[len(p):])
	}
	return ""
}

// ServeHTTP applies the security rules in order (Host, Origin, rate limit,
// token, body limit) and then routes.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &responseWriter{ResponseWriter: w}
	defer func() {
		// The path only: the query may hold an SSE ticket.
		g.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", rw.status, "ms", time.Since(start).Milliseconds())
	}()
	setSecurityHeaders(rw.Header())
	if !g.hostAllowed(r.Host) {
		writeError(rw, http.StatusForbidden, "host "+quoteHost(r.Host)+" is not allowed; use the address the gateway listens on")
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !g.originAllowed(o) {
		writeError(rw, http.StatusForbidden, "cross-origin request refused")
		return
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		writeError(rw, http.StatusForbidden, "cross-site request refused")
		return
	}
	p := r.URL.Path
	switch {
	case p == "/healthz":
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = rw.Write([]byte("ok\n"))
		return
	case p == "/openapi.json":
		// The API's description is public, like /healthz: generated clients
		// and linters read it before they hold a token.
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			rw.Header().Set("Allow", "GET, HEAD")
			writeError(rw, http.StatusMethodNotAllowed, "use GET")
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(openAPIDocument())
		return
	case strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/schemas/"):
		g.serveAPI(rw, r)
	default:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(rw, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		g.static.ServeHTTP(rw, r)
	}
}

func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100]
	}
	b, _ := json.Marshal(h)
	return string(b)
}

func (g *Gateway) serveAPI(w http.ResponseWriter, r *http.Request) {
	s := g.lookup(bearer(r))
	isEvents := isEventsPath(r.URL.Path)
	if s == nil && isEvents && r.Method == http.MethodGet {
		if t := r.URL.Query().Get("ticket"); t != "" {
			s = g.scopeNamed(g.tickets.redeem(t))
		}
	}
	key := "ip:" + clientIP(r)
	if s != nil {
		key = "token:" + s.token.Name
	}
	if ok, wait := g.limit.allow(key); !ok {
		w.Header().Set("Retry-After", retryAfterSeconds(wait))
		writeError(w, http.StatusTooManyRequests, "too many requests; retry after "+retryAfterSeconds(wait)+"s")
		return
	}
	if s == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="termd"`)
		msg := "missing or invalid bearer token: send `Authorization: Bearer <token>`"
		if isEvents {
			msg += " or a ticket from POST /v1/sse-ticket"
		}
		writeError(w, http.StatusUnauthorized, msg)
		return
	}
	if !limitBody(w, r, g.opts.BodyLimit) {
		return
	}
	if r.URL.Path == "/v1/hosts" || strings.HasPrefix(r.URL.Path, "/v1/fleet/") {
		g.serveFleet(w, r, s)
		return
	}
	hc, r, ok := g.route(w, r, s)
	if !ok {
		return
	}
	if termID := terminalStreamID(r.URL.Path); termID != "" {
		g.serveTerminal(w, r, hc, termID)
		return
	}
	switch r.URL.Path {
	case "/v1/events":
		g.serveEvents(w, r, hc)
	case "/v1/sse-ticket":
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		t := g.tickets.issue(s.token.Name)
		writeJSON(w, http.StatusOK, map[string]any{"ticket": t, "expires_in_seconds": int(g.opts.TicketTTL.Seconds())})
	case "/schemas/receipt-1.0.json", "/schemas/receipt-1.1.json", "/schemas/receipt-1.2.json", "/schemas/receipt-1.3.json", "/schemas/receipt-1.4.json", "/schemas/receipt-1.5.json", "/schemas/receipt-1.6.json", "/schemas/receipt-1.7.json":
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write(receiptSchema(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/schemas/receipt-"), ".json")))
	case "/schemas/recipe-1.json":
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write(recipe.SchemaJSON)
	default:
		if strings.HasPrefix(r.URL.Path, "/schemas/") {
			writeError(w, http.StatusNotFound, "no such schema")
			return
		}
		sw := &streamStart{ResponseWriter: w}
		hc.mux.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), streamCodeKey{}, &sw.code)))
	}
}

func (g *Gateway) scopeNamed(name string) *scope {
	if name == "" {
		return nil
	}
	for _, s := range g.scopes {
		if s.token.Name == name {
			return s
		}
	}
	return nil
}

// writeError answers in the same shape as grpc-gateway errors: {code, message}.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// responseWriter records the status for the log and keeps Flush and the
// underlying writer reachable so SSE and streamed responses are not buffered.
type responseWriter struct {
	http.ResponseWriter
	status int
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *responseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
