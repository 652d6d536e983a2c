// Package daemon assembles termd: configuration, the domain services and the
// gRPC server on the unix socket, and the process lifecycle (signals, reload).
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/server"
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
	d.srv = server.New(server.Options{Config: cfg, Log: d.log})
	d.srv.RegisterDaemon(nil)
	l, err := server.Listen(cfg.Socket, cfg.SocketGroup)
	if err != nil {
		return nil, err
	}
	d.listener = l
	return d, nil
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
	d.log.Info("termd listening", "socket", cfg.Socket, "state_dir", cfg.StateDir, "workspaces", cfg.Workspaces, "pid", os.Getpid())
	errc := make(chan error, 1)
	go func() { errc <- d.srv.Serve(d.listener) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	d.log.Info("termd shutting down")
	d.srv.Drain()
	d.srv.Stop(cfg.ShutdownGrace.D() + 2*time.Second)
	_ = os.Remove(cfg.Socket)
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
	if cfg.Socket != old.Socket || cfg.StateDir != old.StateDir {
		d.log.Warn("socket and state_dir changes take effect after a restart", "socket", old.Socket, "state_dir", old.StateDir)
		cfg.Socket, cfg.StateDir = old.Socket, old.StateDir
	}
	d.mu.Lock()
	d.cfg = cfg
	d.mu.Unlock()
	_ = d.level.UnmarshalText([]byte(cfg.LogLevel))
	d.srv.SetConfig(cfg)
	d.log.Info("config reloaded", "source", cfg.Source)
}
