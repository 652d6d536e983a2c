package daemon

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/doctor"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/wire"
)

func init() {
	subcommands = append(subcommands, newDoctorCmd, newConfigDefaultCmd, newPolicyDefaultCmd)
}

type exitError struct {
	msg  string
	code int
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

func newDoctorCmd(deps Deps) *cobra.Command {
	var f Flags
	var output string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this host and installation, explaining each finding and its fix",
		Long: `doctor checks the kernel features termd uses (cgroup v2 or hybrid, kill and
freeze, pids/memory controllers, network namespaces, Landlock, subreaper),
socket, state and key file permissions, policy and config validity, whether
agents and operators share a uid, the adviser's configuration, and whether
the daemon answers. Each line is OK, WARN or FAIL with a fix.

Exit status: 0 when nothing FAILs, 1 when something must be fixed.
Run it as the user termd runs as (root for the system service).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "text" && output != "json" {
				return fmt.Errorf("-o: %q is not text or json", output)
			}
			cfg, cfgErr := f.LoadConfig()
			if cfgErr != nil {
				cfg = partialConfig(&f)
			}
			cs := doctor.Run(doctor.Options{Config: cfg, ConfigErr: cfgErr, DaemonStatus: deps.DaemonStatus})
			w := cmd.OutOrStdout()
			if output == "json" {
				if err := doctor.WriteJSON(w, cs); err != nil {
					return err
				}
			} else {
				doctor.WriteText(w, cs)
			}
			if doctor.Failed(cs) {
				n := 0
				for _, c := range cs {
					if c.Status == doctor.Fail {
						n++
					}
				}
				return &exitError{msg: fmt.Sprintf("doctor: %d problem(s) must be fixed (FAIL lines above)", n), code: 1}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.ConfigFile, "config", "", "config file to check")
	fl.StringVar(&f.Socket, "socket", "", "socket path (overrides the config)")
	fl.StringVar(&f.StateDir, "state-dir", "", "state directory (overrides the config)")
	fl.StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// partialConfig is what can be read of an invalid config, so the other
// checks still run.
func partialConfig(f *Flags) *config.Config {
	c, err := config.Load(f.ConfigFile)
	if err != nil {
		c = config.Default()
	}
	if f.Socket != "" {
		c.Socket = absPath(f.Socket)
	} else if s := os.Getenv("TERMD_SOCKET"); s != "" && c.Socket == "" {
		// The same socket termctl would use.
		c.Socket = absPath(s)
	}
	if f.StateDir != "" {
		c.StateDir = absPath(f.StateDir)
	}
	if err := c.ApplyDefaults(); err != nil {
		if c.Socket == "" {
			c.Socket = wire.SystemSocket
		}
		if c.StateDir == "" {
			c.StateDir = "/var/lib/termd"
		}
	}
	return c
}

func newConfigDefaultCmd(Deps) *cobra.Command {
	var set []string
	cmd := &cobra.Command{
		Use:    "config-default",
		Short:  "Print a config file listing every key with its meaning and default",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m := map[string]string{}
			for _, s := range set {
				k, v, ok := strings.Cut(s, "=")
				if !ok {
					return fmt.Errorf("--set %q: want KEY=YAML-VALUE", s)
				}
				m[k] = v
			}
			y, err := config.ExampleYAML(m)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), y)
			return err
		},
	}
	cmd.Flags().StringArrayVar(&set, "set", nil, "write top-level KEY=VALUE uncommented (repeatable)")
	return cmd
}

func newPolicyDefaultCmd(Deps) *cobra.Command {
	return &cobra.Command{
		Use:    "policy-default",
		Short:  "Print the embedded default policy",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := os.Stdout.Write(policy.DefaultYAML())
			return err
		},
	}
}
