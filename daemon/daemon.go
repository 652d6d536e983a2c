// Package daemon assembles termd: configuration, the domain services and the
// gRPC server on the unix socket, and the process lifecycle (signals, reload).
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/termd/termd/daemon/adviser"
	"github.com/termd/termd/daemon/broker"
	"github.com/termd/termd/daemon/broker/stages"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/events"
	"github.com/termd/termd/daemon/metrics"
	"github.com/termd/termd/daemon/otlpexport"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/recipes"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/daemon/search"
	"github.com/termd/termd/daemon/server"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Daemon is one running termd.
type Daemon struct {
	flags *Flags
	log   *slog.Logger
	level *slog.LevelVar

	mu  sync.Mutex
	cfg *config.Config

	srv      *server.Server
	listener net.Listener
	policy   *policy.Engine
	runner   *runner.Runner
	store    *receiptstore.Store
	search   *search.Index
	export   *otlpexport.Exporter // nil when OTLP export is off
	broker   *broker.Broker

	activated bool // the socket came from the service manager (systemd socket activation)
	// opListener is the operator socket (nil: operator_socket: none);
	// opActivated says the service manager made it.
	opListener  net.Listener
	opActivated bool
	// tlsListener is the mutual-TLS TCP listener (nil: listen_tls off).
	tlsListener net.Listener
	metrics     *metrics.Recorder
	metricsLn   *metrics.Server
	// stages keeps the executions' stage times (/debug/stages).
	stages stages.Log
}

// New prepares a daemon: state directory, logging and the socket.
func New(cfg *config.Config, flags *Flags) (*Daemon, error) {
	level := new(slog.LevelVar)
	d := &Daemon{flags: flags, cfg: cfg, level: level}
	d.log = newLogger(cfg, level)
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state_dir %s: %w", cfg.StateDir, err)
	}
	if err := os.Chmod(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state_dir %s: %w", cfg.StateDir, err)
	}
	if err := d.assemble(cfg); err != nil {
		d.close()
		return nil, err
	}
	l, op, err := server.Activated()
	if err == nil && l != nil {
		d.activated = true
		if a := l.Addr().String(); a != cfg.Socket {
			d.log.Warn("the service manager's socket differs from the configured socket; clients must use the activated one", "activated", a, "socket", cfg.Socket)
		}
	} else if err == nil {
		l, err = server.Listen(cfg.Socket, cfg.SocketGroup)
	}
	if err != nil {
		d.close()
		return nil, err
	}
	d.listener = l
	if op != nil {
		d.opActivated = true
	} else if cfg.OperatorSocket != "" {
		// Also beside an activated socket whose unit passed no operator
		// socket (termd-operator.socket): termd makes it and removes it.
		op, err = server.ListenOperator(cfg.OperatorSocket)
		if errors.Is(err, server.ErrSocketPathTooLong) {
			// Beside a socket whose path is already near the limit: serve
			// without it rather than not at all, and say so.
			d.log.Warn("no operator socket: operators share the socket with agents", "error", err)
			op, err = nil, nil
		}
		if err != nil {
			l.Close()
			d.close()
			return nil, err
		}
	}
	d.opListener = op
	if cfg.ListenTLS.Enabled() {
		if d.tlsListener, err = server.ListenTCP(cfg.ListenTLS.Address); err != nil {
			l.Close()
			if op != nil {
				op.Close()
			}
			d.close()
			return nil, err
		}
	}
	if cfg.MetricsListen != "" {
		if d.metricsLn, err = d.metrics.Serve(cfg.MetricsListen, d.log); err != nil {
			l.Close()
			if op != nil {
				op.Close()
			}
			if d.tlsListener != nil {
				d.tlsListener.Close()
			}
			d.close()
			return nil, err
		}
	}
	return d, nil
}

// assemble builds the domain services and the gRPC server.
func (d *Daemon) assemble(cfg *config.Config) error {
	var err error
	if d.policy, err = policy.NewEngine(cfg.Policy); err != nil {
		return err
	}
	red, err := loadRedactor(cfg.Secrets)
	if err != nil {
		return err
	}
	keys, err := receiptstore.LoadOrCreateKeys(filepath.Join(cfg.StateDir, "keys"))
	if err != nil {
		return err
	}
	if d.store, err = receiptstore.Open(filepath.Join(cfg.StateDir, "receipts.db"), keys); err != nil {
		return err
	}
	// Before the broker starts: receipts it appends at start are indexed too.
	d.search = search.Open(filepath.Join(cfg.StateDir, "search.db"), d.store, d.log)
	if err := d.startExport(cfg); err != nil {
		return err
	}
	if err := d.startRunner(); err != nil {
		return err
	}
	sup := d.sandboxSupport(cfg)
	var adv broker.Adviser
	if a := adviserFrom(cfg, red, d.log); a != nil {
		adv = a
	}
	d.metrics = metrics.New()
	d.broker, err = broker.New(broker.Deps{
		Config:   d.config,
		Policy:   d.policy,
		Runner:   d.runner,
		Sandbox:  sup,
		Store:    d.store,
		Keys:     keys,
		Redactor: red,
		Search:   d.search,
		// A session's ring holds 4 MiB: eight of the live output's full
		// (512 KiB) events, so a reader of a flood (ExecuteAndWait of a `cat`)
		// lags only when it falls ~4 MiB behind. At 1 MiB (two full events) a
		// test reading 3 MiB of `cat` lagged in about 1 run of 8 at a load of
		// 7-9 on 2 cores, 0 of 8 at 4 MiB. The global ring shares the events.
		Bus:     events.New(events.Options{SessionRingBytes: 4 << 20, GlobalRingBytes: 8 << 20}),
		Adviser: adv,
		Log:     d.log,
		Metrics: d.metrics,
		Stages:  &d.stages,
		Stall:   testStall(),
	})
	if err != nil {
		return err
	}
	var tlsConf *tls.Config
	if cfg.ListenTLS.Enabled() {
		if tlsConf, err = server.TLSConfig(cfg.ListenTLS); err != nil {
			return err
		}
	}
	d.srv = server.New(server.Options{Config: cfg, Log: d.log, RefusePeer: d.refusePeer, TLS: tlsConf})
	d.observeGauges(tlsConf != nil)
	d.observeExport()
	d.srv.RegisterDaemon(d.broker)
	d.srv.RegisterBroker(d.broker)
	d.srv.RegisterRecipes(recipes.New(d.broker, func() string { return d.config().RecipesDir }))
	return nil
}

// loadRedactor reads the secrets files, one secret a line, into a redactor.
func loadRedactor(files []string) (*receiptstore.Redactor, error) {
	red := receiptstore.NewRedactor()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("secrets: %w", err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v := strings.TrimSpace(line); v != "" {
				red.AddSecret(v)
			}
		}
	}
	return red, nil
}

// startRunner makes the execution runtime (with spawn pools unless
// TERMD_SPAWN_POOL=0) and logs what cgroups it can use.
func (d *Daemon) startRunner() error {
	if err := runner.EnableSubreaper(); err != nil {
		d.log.Warn("no child subreaper: double-forked children are found through cgroups only", "error", err)
	}
	var ropts runner.Options
	switch v := os.Getenv("TERMD_SPAWN_POOL"); v {
	case "", "1":
	case "0":
		ropts.NoPool = true
	default:
		return fmt.Errorf("TERMD_SPAWN_POOL=%q: set it to 0 to make every execution's network namespace and cgroup at spawn (no spawn pools), or leave it unset", v)
	}
	switch v := os.Getenv("TERMD_CGROUP_REUSE"); v {
	case "", "1":
	case "0":
		ropts.NoCgroupReuse = true
	default:
		return fmt.Errorf("TERMD_CGROUP_REUSE=%q: set it to 0 to remove every execution's cgroup at its end (no reuse), or leave it unset", v)
	}
	var err error
	if d.runner, err = runner.NewWithOptions(ropts); err != nil {
		return fmt.Errorf("execution runtime: %w", err)
	}
	if d.runner.LeafMove != "" {
		d.log.Info("cgroup delegation", "detail", d.runner.LeafMove)
	}
	caps := d.runner.Capabilities()
	for _, m := range caps.CgroupMissing {
		d.log.Warn("cgroups: "+m, "layout", caps.Layout)
	}
	if caps.CgroupV2 != "" && len(caps.CgroupMissing) == 0 {
		d.log.Info("cgroups: each execution gets its own cgroup with pids and memory limits", "layout", caps.Layout, "v2", caps.CgroupV2)
	}
	return nil
}

// sandboxSupport finds what this host's kernel can confine and logs it.
func (d *Daemon) sandboxSupport(cfg *config.Config) sandbox.Support {
	sup, mode := sandbox.ForHost(cfg.SandboxLauncher, cfg.Sandbox)
	switch level := sup.Level(mode); {
	case level == sandbox.LevelFull:
		d.log.Info("sandbox: every execution is confined by the kernel", "mode", mode, "platform", sup.Platform, "landlock_abi", sup.LandlockABI)
	case mode == sandbox.Required:
		d.log.Error("sandbox: required but this host cannot enforce it: every execution will be refused until this is fixed (or set sandbox: best_effort)", "missing", strings.Join(sup.Missing(), "; "))
	default:
		d.log.Warn("sandbox: executions are NOT fully confined by the kernel", "mode", mode, "level", level, "missing", strings.Join(sup.Missing(), "; "))
	}
	return sup
}

// observeGauges hands the metrics the daemon's live figures.
func (d *Daemon) observeGauges(tls bool) {
	g := metrics.Gauges{
		ActiveSessions: func() int {
			return len(d.broker.ListSessions(context.Background(), &termdv1.Principal{Role: termdv1.Role_ROLE_OPERATOR}, false))
		},
		ActiveExecutions:   d.broker.ActiveExecutions,
		Subscribers:        d.broker.Subscribers,
		Connections:        func() int { n, _ := d.srv.Connections(); return int(n) },
		ConnectionsRefused: func() int { _, n := d.srv.Connections(); return int(n) },
		StateFreeBytes:     func() int { f, _ := d.broker.StorageUsage(); return int(f) },
		StoredDayBytes:     func() int { _, n := d.broker.StorageUsage(); return int(n) },
		Receipts:           d.store.Count,
		PlansHeld:          func() int { n, _ := d.broker.PlanStats(); return n },
		OpenPlans:          func() int { _, n := d.broker.PlanStats(); return n },
		JournalBytes:       func() int { n, _, _ := d.broker.JournalStats(); return int(n) },
		StoreWrites:        func() int { n, _ := d.store.WriteStats(); return int(n) },
		StoreCommits:       func() int { _, n := d.store.WriteStats(); return int(n) },
	}
	if tls {
		g.TLSHandshakesRefused = func() int { n, _ := d.srv.TLSStats(); return int(n) }
		g.TLSCalls = func() int { _, n := d.srv.TLSStats(); return int(n) }
	}
	d.metrics.Observe(g)
}

// refusePeer refuses socket connections from processes termd started.
func (d *Daemon) refusePeer(pid int32) error {
	if pid > 0 && d.runner.IsExecutionProcess(int(pid)) {
		d.log.Warn("refused a connection from a process termd started", "pid", pid)
		return fmt.Errorf("pid %d was started by termd; commands cannot call back into termd", pid)
	}
	return nil
}

func adviserFrom(cfg *config.Config, red *receiptstore.Redactor, log *slog.Logger) *adviser.Adviser {
	a := cfg.Adviser
	if a.Enabled != nil && !*a.Enabled {
		return nil
	}
	return adviser.New(adviser.Config{
		Enabled:     true,
		BaseURL:     a.BaseURL,
		Model:       a.Model,
		APIKeyEnv:   a.APIKeyEnv,
		APIKeyFile:  a.APIKeyFile,
		Timeout:     a.Timeout.D(),
		IdleTimeout: a.IdleTimeout.D(),
		MaxTokens:   a.MaxTokens,
		MaxAttempts: a.MaxAttempts,
		History:     a.History,
	}, red, log.With("component", "adviser"))
}

func (d *Daemon) close() {
	d.export.Close()
	if d.search != nil {
		_ = d.search.Close()
	}
	if d.store != nil {
		_ = d.store.Close()
	}
	if d.runner != nil {
		_ = d.runner.Close()
	}
}

func newLogger(cfg *config.Config, level *slog.LevelVar) *slog.Logger {
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// Run serves until ctx ends (SIGTERM), then shuts down gracefully.
func (d *Daemon) Run(ctx context.Context) error {
	cfg := d.config()
	if addr := os.Getenv("TERMD_DEBUG_PPROF"); addr != "" {
		startPprof(addr, d.log, func() string { return d.stages.Report() + "spawn pools: " + d.runner.PoolStatus() + "\n" })
	}
	opSock := ""
	if d.opListener != nil {
		opSock = d.opListener.Addr().String()
	}
	tlsAddr := ""
	if d.tlsListener != nil {
		tlsAddr = d.tlsListener.Addr().String()
	}
	d.log.Info("termd listening", "socket", cfg.Socket, "operator_socket", opSock, "listen_tls", tlsAddr, "state_dir", cfg.StateDir, "workspaces", cfg.Workspaces, "pid", os.Getpid())
	errc := make(chan error, 3)
	if d.tlsListener != nil {
		go func() { errc <- d.srv.Serve(d.tlsListener) }()
	}
	go func() { errc <- d.srv.Serve(d.listener) }()
	if d.opListener != nil {
		go func() { errc <- d.srv.Serve(d.opListener) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	d.log.Info("termd shutting down", "running", d.broker.ActiveExecutions(), "grace", cfg.ShutdownGrace.D().String())
	d.srv.Drain()
	d.broker.Shutdown(cfg.ShutdownGrace.D())
	d.srv.Stop(2 * time.Second)
	d.metricsLn.Close()
	if !d.activated { // an activated socket belongs to the service manager
		_ = os.Remove(cfg.Socket)
	}
	if d.opListener != nil && !d.opActivated {
		_ = os.Remove(opSock)
	}
	d.close()
	d.log.Info("termd stopped")
	return nil
}

func (d *Daemon) config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// Reload re-reads the config (SIGHUP). An invalid config is logged and the
// last good one stays active.
func (d *Daemon) Reload() {
	cfg, err := d.flags.LoadConfig()
	if err != nil {
		d.log.Error("config reload refused; keeping the last good config", "error", err)
		return
	}
	old := d.config()
	if cfg.Socket != old.Socket || cfg.StateDir != old.StateDir || cfg.OperatorSocket != old.OperatorSocket {
		d.log.Warn("socket, operator_socket and state_dir changes take effect after a restart", "socket", old.Socket, "operator_socket", old.OperatorSocket, "state_dir", old.StateDir)
		cfg.Socket, cfg.StateDir, cfg.OperatorSocket = old.Socket, old.StateDir, old.OperatorSocket
	}
	if cfg.ListenTLS.Address != old.ListenTLS.Address {
		d.log.Warn("listen_tls.address changes take effect after a restart", "address", old.ListenTLS.Address)
		cfg.ListenTLS.Address = old.ListenTLS.Address
	}
	if d.tlsListener != nil {
		// Rotated certificates, key or client CA take effect for new
		// connections; listen_tls.clients is read at every call.
		conf, err := server.TLSConfig(cfg.ListenTLS)
		if err != nil {
			d.log.Error("config reload refused; keeping the last good config", "error", err)
			return
		}
		d.srv.SetTLS(conf)
	}
	if !reflect.DeepEqual(cfg.Export, old.Export) {
		d.log.Warn("export changes take effect after a restart; exporting as before")
	}
	d.mu.Lock()
	d.cfg = cfg
	d.mu.Unlock()
	config.FlushUsers() // accounts and groups may have changed too
	_ = d.level.UnmarshalText([]byte(cfg.LogLevel))
	d.srv.SetConfig(cfg)
	d.log.Info("config reloaded", "source", cfg.Source)
	if _, err := d.broker.ReloadPolicy(); err != nil {
		d.log.Error("policy reload refused", "error", err)
	}
}
