// Package metrics exposes termd's Prometheus metrics on an opt-in loopback
// listener (config key metrics_listen). Metrics carry counts, durations and
// sizes only: never commands, arguments, output or principals.
//
// The broker reports events through a Recorder (PlanDecided,
// ExecutionFinished, PolicyReloaded); gauges are read at scrape time from
// functions the daemon supplies (Gauges). A nil *Recorder ignores every call.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Recorder counts what the broker does.
type Recorder struct {
	reg      *prometheus.Registry
	plans    *prometheus.CounterVec
	execs    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	output   prometheus.Counter
	reloads  *prometheus.CounterVec
}

// Gauges are read at every scrape. Nil functions are not exported.
type Gauges struct {
	ActiveSessions     func() int
	ActiveExecutions   func() int
	Subscribers        func() int
	Connections        func() int
	ConnectionsRefused func() int
	StateFreeBytes     func() int
	StoredDayBytes     func() int
	Receipts           func() (int64, error)
	// PlansHeld and OpenPlans count the plans termd holds in memory and the
	// open ones among them; JournalBytes is the plan journal's size.
	PlansHeld    func() int
	OpenPlans    func() int
	JournalBytes func() int
	// TLSHandshakesRefused and TLSCalls count, on the mutual-TLS listener
	// (listen_tls), failed handshakes and calls that arrived (nil: off).
	TLSHandshakesRefused func() int
	TLSCalls             func() int
	// StoreWrites and StoreCommits count the receipt store's committed
	// writes and its transactions (one fsync each) since start.
	StoreWrites  func() int
	StoreCommits func() int
}

// New makes a Recorder with its own registry (Go runtime and process
// collectors included).
func New() *Recorder {
	r := &Recorder{reg: prometheus.NewRegistry()}
	r.plans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "termd_plans_total",
		Help: "Plans created, by policy decision (allow, ask, deny).",
	}, []string{"decision"})
	r.execs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "termd_executions_total",
		Help: "Executions finished, by final status (succeeded, failed, timed_out, cancelled, killed, output_limit).",
	}, []string{"status"})
	r.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "termd_execution_duration_seconds",
		Help:    "Wall-clock duration of finished executions, by final status.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
	}, []string{"status"})
	r.output = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "termd_output_bytes_total",
		Help: "Bytes of stdout and stderr produced by finished executions (before the output cap).",
	})
	r.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "termd_policy_reloads_total",
		Help: "Policy reload attempts, by result (ok, refused: the last good policy stayed active).",
	}, []string{"result"})
	r.reg.MustRegister(r.plans, r.execs, r.duration, r.output, r.reloads,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, v := range []string{"allow", "ask", "deny"} {
		r.plans.WithLabelValues(v)
	}
	for _, v := range []string{"ok", "refused"} {
		r.reloads.WithLabelValues(v)
	}
	return r
}

// PlanDecided counts a new plan by its policy verdict.
func (r *Recorder) PlanDecided(verdict string) {
	if r == nil {
		return
	}
	r.plans.WithLabelValues(verdict).Inc()
}

// ExecutionFinished counts a finished execution, its duration and output.
func (r *Recorder) ExecutionFinished(status string, d time.Duration, outBytes int64) {
	if r == nil {
		return
	}
	r.execs.WithLabelValues(status).Inc()
	r.duration.WithLabelValues(status).Observe(d.Seconds())
	if outBytes > 0 {
		r.output.Add(float64(outBytes))
	}
}

// PolicyReloaded counts a policy reload attempt.
func (r *Recorder) PolicyReloaded(ok bool) {
	if r == nil {
		return
	}
	res := "ok"
	if !ok {
		res = "refused"
	}
	r.reloads.WithLabelValues(res).Inc()
}

// Observe registers the scrape-time gauges.
func (r *Recorder) Observe(g Gauges) {
	if r == nil {
		return
	}
	gauge := func(name, help string, f func() int) {
		if f != nil {
			r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) }))
		}
	}
	gauge("termd_active_sessions", "Open sessions.", g.ActiveSessions)
	gauge("termd_active_executions", "Executions running now.", g.ActiveExecutions)
	gauge("termd_connections", "Open connections on termd's socket.", g.Connections)
	gauge("termd_connections_refused", "Connections refused at accept since start (no role, or over connections.per_uid / connections.global).", g.ConnectionsRefused)
	gauge("termd_state_free_bytes", "Free bytes on the state directory's filesystem (storage.min_free_bytes is the floor).", g.StateFreeBytes)
	gauge("termd_receipt_bytes_24h", "Bytes of receipts stored in the last 24 hours (storage.global_day is the budget).", g.StoredDayBytes)
	gauge("termd_plans_held", "Plans held in memory (open ones, running ones and the finished ones kept under plans.keep_finished and plans.max_journal_bytes).", g.PlansHeld)
	gauge("termd_open_plans", "Open plans (planned, awaiting approval or approved) across principals (plans.max_open bounds each principal).", g.OpenPlans)
	gauge("termd_plan_journal_bytes", "Size of the plan journal (plans.jsonl); it is compacted when dead records outweigh live ones.", g.JournalBytes)
	gauge("termd_event_subscribers", "Event stream subscribers (watchers, consoles, bridges).", g.Subscribers)
	gauge("termd_tls_handshakes_refused", "TLS handshakes on listen_tls refused since start (no client certificate, one from another CA, not TLS 1.3): none of them reached a call.", g.TLSHandshakesRefused)
	gauge("termd_receipt_store_writes", "Durable writes (execution intents, receipts, spawn records) the receipt store committed since start.", g.StoreWrites)
	gauge("termd_receipt_store_commits", "Transactions the receipt store committed since start, one fsync each: concurrent writes share one (group commit), so writes per commit above 1 is fsyncs saved.", g.StoreCommits)
	gauge("termd_tls_calls", "Calls that arrived over listen_tls since start, whether their certificate mapped to a principal or not.", g.TLSCalls)
	if g.Receipts != nil {
		r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "termd_receipts",
			Help: "Receipts in the receipt store (-1 when the store cannot be read).",
		}, func() float64 {
			n, err := g.Receipts()
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
}

// ExportGauges are the OTLP receipt exporter's figures (docs/EXPORT.md).
type ExportGauges struct {
	Lag         func() int64   // receipts in the chain not yet acknowledged by the collector
	Exported    func() int64   // seq of the last acknowledged receipt
	Failures    func() int64   // failed export attempts since start
	LastSuccess func() float64 // unix time of the last acknowledged batch (0: none yet)
}

// ObserveExport registers the exporter's gauges.
func (r *Recorder) ObserveExport(g ExportGauges) {
	if r == nil {
		return
	}
	r.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "termd_otlp_export_lag_receipts", Help: "Receipts in the chain that the OTLP collector has not acknowledged yet (they are exported when it does)."}, func() float64 { return float64(g.Lag()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "termd_otlp_exported_seq", Help: "Seq of the last receipt the OTLP collector acknowledged (the durable export cursor)."}, func() float64 { return float64(g.Exported()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "termd_otlp_export_failures_total", Help: "OTLP export attempts that failed (collector unreachable or refusing); each is retried with backoff."}, func() float64 { return float64(g.Failures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "termd_otlp_export_last_success_timestamp_seconds", Help: "Unix time of the last batch the OTLP collector acknowledged (0: none since start)."}, g.LastSuccess),
	)
}

// Handler serves the registry in the Prometheus text format.
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

// Server is the metrics HTTP listener.
type Server struct {
	srv  *http.Server
	addr net.Addr
}

// Addr is the address actually listened on.
func (s *Server) Addr() net.Addr { return s.addr }

// Serve listens on addr (which config validation keeps on loopback) and
// serves /metrics until Close.
func (r *Recorder) Serve(addr string, log *slog.Logger) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics_listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", r.Handler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "termd metrics: see /metrics")
	})
	s := &Server{addr: l.Addr(), srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}
	go func() {
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "error", err)
		}
	}()
	log.Info("metrics listening", "address", l.Addr().String())
	return s, nil
}

// Close stops the listener.
func (s *Server) Close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
