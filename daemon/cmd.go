package daemon

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/doctor"
	"github.com/termd/termd/internal/buildinfo"
	"github.com/termd/termd/internal/entry"
)

// Flags are the command-line settings; each overrides the config file.
type Flags struct {
	ConfigFile string
	Socket     string
	StateDir   string
	Policy     string
	Workspaces []string
	LogLevel   string
	LogFormat  string
	ConsoleURL string
	Private    []string
}

// absPath makes a path given on the command line absolute (relative to the
// shell's directory, which is what the person meant); config files require
// absolute paths themselves.
func absPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// LoadConfig reads the config file and applies the flags over it, strictly.
func (f *Flags) LoadConfig() (*config.Config, error) {
	c, err := config.Load(f.ConfigFile)
	if err != nil {
		return nil, err
	}
	if f.Socket != "" {
		c.Socket = absPath(f.Socket)
	}
	if f.StateDir != "" {
		c.StateDir = absPath(f.StateDir)
	}
	if f.Policy != "" {
		c.Policy = f.Policy
	}
	for _, w := range f.Workspaces {
		c.Workspaces = append(c.Workspaces, absPath(w))
	}
	if f.LogLevel != "" {
		c.LogLevel = f.LogLevel
	}
	if f.LogFormat != "" {
		c.LogFormat = f.LogFormat
	}
	if f.ConsoleURL != "" {
		c.ConsoleURL = f.ConsoleURL
	}
	for _, p := range f.Private {
		c.PrivatePaths = append(c.PrivatePaths, absPath(p))
	}
	if err := c.ApplyDefaults(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		if c.Source != "" {
			return nil, fmt.Errorf("config %s: %w", c.Source, err)
		}
		return nil, err
	}
	return c, nil
}

// Deps are what termd's command line is handed by its main, for what no
// package under daemon/ may link itself.
type Deps struct {
	// DaemonStatus is how `termd doctor` asks a running termd for its
	// status: cmd/termd dials through client/.
	DaemonStatus doctor.StatusFunc
}

// NewCommand is termd's command line.
func NewCommand(deps Deps) *cobra.Command {
	var f Flags
	cmd := &cobra.Command{
		Use:   "termd",
		Short: "termd: the privileged command broker (daemon)",
		Long: `termd owns command policy, sessions, execution and receipt signing. It serves a
gRPC API on a unix socket; termctl, termd-mcp and termd-gateway are its clients.

It runs in the foreground (systemd and launchd supervise it). SIGHUP reloads the
config and policy (keeping the last good ones when the new ones are invalid);
SIGTERM stops accepting work, lets running executions finish up to the
configured grace, and exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.LoadConfig()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			d, err := New(cfg, &f)
			if err != nil {
				return err
			}
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go func() {
				for range hup {
					d.Reload()
				}
			}()
			return d.Run(ctx)
		},
	}
	for _, sub := range subcommands {
		cmd.AddCommand(sub(deps))
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see `%s --help`)", err, c.CommandPath())
	})
	fl := cmd.Flags()
	fl.StringVar(&f.ConfigFile, "config", "", "config file (YAML; see docs/CONFIG.md)")
	fl.StringVar(&f.Socket, "socket", "", "unix socket path (default $XDG_RUNTIME_DIR/termd/termd.sock, or /run/termd/termd.sock as root)")
	fl.StringVar(&f.StateDir, "state-dir", "", "state directory for receipts and keys")
	fl.StringVar(&f.Policy, "policy", "", "policy file (default: the embedded policy)")
	fl.StringArrayVar(&f.Workspaces, "workspace", nil, "add a workspace root; commands run only inside workspace roots (repeatable)")
	fl.StringVar(&f.LogLevel, "log-level", "", "debug, info, warn or error")
	fl.StringVar(&f.LogFormat, "log-format", "", "text or json")
	fl.StringVar(&f.ConsoleURL, "console-url", "", "web console base URL used in approval links")
	fl.StringArrayVar(&f.Private, "private", nil, "add a file or directory no execution may read or name (private_paths: the gateway's token file, log files; repeatable)")
	return entry.Prepare(cmd, buildinfo.String())
}

// subcommands are added by their own files (e.g. `termd doctor`).
var subcommands []func(Deps) *cobra.Command

// Main runs termd and returns the process exit code. Unless the profiler
// is served (TERMD_DEBUG_PPROF), allocations are not sampled for memory
// profiles, which nothing reads then (as termd-mcp): the runtime keeps a
// record of every distinct stack it sampled, in a table it never gives
// back (BuckHashSys: 2.6 MB of termd's RSS at 32 clients when sampling
// every 4 KiB).
func Main(deps Deps) int {
	if os.Getenv("TERMD_DEBUG_PPROF") == "" {
		runtime.MemProfileRate = 0
	}
	return entry.Run(NewCommand(deps), os.Args[1:], os.Stderr)
}
