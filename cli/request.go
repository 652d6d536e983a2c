package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/netmode"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// requestFlags are the flags that describe a command request; plan, run and
// policy check share them so a command is spelled the same way everywhere.
type requestFlags struct {
	session string
	cwd     string
	command string
	mode    string
	env     []string
	timeout time.Duration
	sandbox string
	// credentials are names of credentials the command receives.
	credentials []string
	// privileged asks to run as real host root (always asked).
	privileged bool
	// network is the network asked for (netmode): "" = the policy's choice.
	network string
	// tty asks for a pseudo-terminal (run --tty); nil: none.
	tty *termdv1.TerminalOptions
	// stdin (-i) sends termctl's standard input as the command's; unset,
	// it is sent when it is a pipe or a file (readStdin).
	stdin bool
}

func (f *requestFlags) register(cmd *cobra.Command, withSession, withTimeout bool) {
	fs := cmd.Flags()
	if withSession {
		fs.StringVar(&f.session, "session", "", "session to plan in (default: the most recent session termctl opened for you, or a new one)")
		fs.BoolVarP(&f.stdin, "stdin", "i", false, "send termctl's standard input to the command (default: when it is a pipe or a file, not a terminal; --stdin=false: never, the command reads /dev/null); at most termd's plans.max_stdin_bytes (1 MiB by default)")
	}
	fs.StringVar(&f.cwd, "cwd", "", "working directory; must be inside a workspace (default: the current directory)")
	fs.StringVar(&f.command, "command", "", "the command as one string, split like a shell would but never run by one (instead of ARGV)")
	fs.StringArrayVar(&f.env, "env", nil, "environment variable `K=V` for the command (repeatable; only names the policy allows)")
	fs.StringArrayVar(&f.credentials, "credential", nil, "credential `NAME` the command receives in its environment (repeatable; `termctl credentials` lists yours); termd reads the value when it runs, you never see it")
	fs.BoolVar(&f.privileged, "privileged", false, "run as real host root (termd as root, Linux): without it a command run for root is root only inside a user namespace and an unprivileged uid on the host; a privileged plan always needs a person's approval")
	fs.StringVar(&f.network, "network", "", "network: none, workspace-loopback (127.0.0.1 shared with your other executions in this workspace, nothing outside), host (asked in confirm mode) or egress:NAME (an allow-list in termd's config); default: the policy's (workspace-loopback, or host for a program that needs the network; curl or wget to loopback URLs only: workspace-loopback)")
	fs.StringVar(&f.mode, "mode", "", "policy mode: inspect, confirm or trusted (default: the policy's)")
	fs.StringVar(&f.sandbox, "sandbox", "", "sandbox profile: read-only or workspace-write (default: the policy's; a program without a grammar runs read-only unless given workspace-write, which makes it project code)")
	if withTimeout {
		fs.DurationVar(&f.timeout, "timeout", 0, "time limit, e.g. 30s or 5m (default: the policy's)")
	}
	_ = cmd.RegisterFlagCompletionFunc("mode", completeWords("inspect", "confirm", "trusted"))
	_ = cmd.RegisterFlagCompletionFunc("sandbox", completeWords("read-only", "workspace-write"))
	_ = cmd.RegisterFlagCompletionFunc("network", completeWords("none", "workspace-loopback", "host", "egress:"))
	// Everything after the first argument belongs to the command, so
	// `termctl plan ls -la` works as well as `termctl plan -- ls -la`.
	fs.SetInterspersed(false)
}

// sessionFor is the session a plan from termctl goes into: --session, else
// this user's most recent open session that termctl opened, else a new one
// labelled "termctl". (Left to the daemon, "your most recent session" could be
// the one an MCP bridge or the console opened for the same user.)
func (f *requestFlags) sessionFor(ctx context.Context, c *client.Client) string {
	if f.session != "" {
		return f.session
	}
	uid := uint32(os.Getuid())
	mine := func(o *termdv1.Principal) bool { return o.GetUid() == uid && o.GetCert() == "" }
	if client.IsTLSTarget(c.Socket) {
		// Over mutual TLS this process's uid means nothing to termd: the
		// session must be this certificate's.
		st, err := c.Daemon.GetStatus(ctx, &termdv1.GetStatusRequest{})
		me := st.GetCaller()
		mine = func(o *termdv1.Principal) bool {
			return err == nil && o.GetCert() != "" && o.GetCert() == me.GetCert() && o.GetName() == me.GetName()
		}
	}
	if ls, err := c.Sessions.ListSessions(ctx, &termdv1.ListSessionsRequest{}); err == nil {
		var best *termdv1.Session
		for _, s := range ls.GetSessions() {
			o := s.GetOwner()
			if s.GetClosed() || s.GetLabel() != cliSessionLabel || !mine(o) || o.GetVia() != "" {
				continue
			}
			if best == nil || s.GetLastActiveAt().AsTime().After(best.GetLastActiveAt().AsTime()) {
				best = s
			}
		}
		if best != nil {
			return best.GetId()
		}
	}
	if cs, err := c.Sessions.CreateSession(ctx, &termdv1.CreateSessionRequest{Label: cliSessionLabel}); err == nil {
		return cs.GetSession().GetId()
	}
	return "" // the daemon's choice (e.g. at the session cap)
}

const cliSessionLabel = "termctl"

// build turns the flags and ARGV into a request.
func (f *requestFlags) build(argv []string) (*termdv1.CommandRequest, error) {
	req := &termdv1.CommandRequest{}
	switch {
	case f.command != "" && len(argv) > 0:
		return nil, usageErr(errors.New("give the command either as ARGV after -- or with --command, not both"))
	case f.command != "":
		req.Command = f.command
	case len(argv) > 0:
		req.Argv = argv
	default:
		return nil, usageErr(errors.New("no command: give it after --, e.g. `-- ls -la`, or with --command \"ls -la\""))
	}
	m, err := parseMode(f.mode)
	if err != nil {
		return nil, usageErr(err)
	}
	req.Mode = m
	req.Cwd = f.cwd
	if req.Cwd == "" {
		if wd, err := os.Getwd(); err == nil {
			req.Cwd = wd
		}
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErr(fmt.Errorf("--env %q: write it as NAME=value", kv))
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	switch f.sandbox {
	case "", "read-only", "workspace-write":
		req.Sandbox = f.sandbox
	default:
		return nil, usageErr(fmt.Errorf("--sandbox %q: use read-only or workspace-write", f.sandbox))
	}
	if f.timeout < 0 {
		return nil, usageErr(fmt.Errorf("--timeout %s: must be positive", f.timeout))
	}
	if f.timeout > 0 {
		secs := math.Ceil(f.timeout.Seconds())
		if secs > math.MaxUint32 {
			return nil, usageErr(fmt.Errorf("--timeout %s is too long", f.timeout))
		}
		req.TimeoutSeconds = uint32(secs)
	}
	for _, n := range f.credentials {
		if !credentialName.MatchString(n) {
			return nil, usageErr(fmt.Errorf("--credential %q: give a credential's name such as GH_TOKEN (`termctl credentials` lists yours), never its value", n))
		}
	}
	req.Credentials = f.credentials
	req.Privileged = f.privileged
	if _, _, err := netmode.Parse(f.network); err != nil {
		return nil, usageErr(fmt.Errorf("--network: %w", err))
	}
	req.Network = f.network
	req.Tty = f.tty
	return req, nil
}

// maxStdin is the most stdin termctl sends: a request travels in one
// message (connections.max_message_bytes, 4 MiB by default), and termd's
// own limit (plans.max_stdin_bytes) is at most 3 MiB.
const maxStdin = 3 << 20

// readStdin is the command's stdin: in, read to its end, with -i; without
// the flag, when in is a pipe or a regular file (as in
// "echo hi | termctl run -- cat"), never a terminal; nil with
// --stdin=false or for a terminal (--tty) plan, whose input is typed.
func (f *requestFlags) readStdin(cmd *cobra.Command, in io.Reader) ([]byte, error) {
	if in == nil || f.tty != nil || cmd.Flags().Lookup("stdin") == nil {
		if f.stdin && f.tty != nil {
			return nil, usageErr(errors.New("--stdin and --tty do not go together: a terminal's input is what you type into it"))
		}
		return nil, nil
	}
	if cmd.Flags().Changed("stdin") {
		if !f.stdin {
			return nil, nil
		}
	} else if !pipedOrFile(in) {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(in, maxStdin+1))
	if err != nil {
		return nil, fmt.Errorf("reading stdin for the command: %w", err)
	}
	if len(data) > maxStdin {
		return nil, usageErr(fmt.Errorf("stdin is more than %d MiB, more than termd takes with a plan (plans.max_stdin_bytes, 1 MiB by default): put the input in a file in the workspace and pass its name (or give --stdin=false)", maxStdin>>20))
	}
	return data, nil
}

// pipedOrFile says whether in is a pipe or a regular file (not a
// terminal, /dev/null or a socket a parent may hold open).
func pipedOrFile(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil {
		return false
	}
	m := st.Mode()
	return m.IsRegular() || m&os.ModeNamedPipe != 0
}

// credentialName is the shape of a credential's name.
var credentialName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

func usageErr(err error) error { return exitWith(ExitUsage, err) }

// timeout bounds one unary call to the daemon.
func (a *app) timeout() time.Duration { return 30 * time.Second }

// plan builds a request from the flags and ARGV and plans it in the
// caller's session (what `plan` and `run` both start with).
func (a *app) plan(cmd *cobra.Command, rf *requestFlags, args []string) (*termdv1.Plan, *client.Client, error) {
	req, err := rf.build(args)
	if err != nil {
		return nil, nil, err
	}
	if req.Stdin, err = rf.readStdin(cmd, a.stdin); err != nil {
		return nil, nil, err
	}
	ctx, c, err := a.dial(cmd)
	if err != nil {
		return nil, nil, err
	}
	stop := a.spin("planning")
	resp, err := c.Plans.CreatePlan(ctx, &termdv1.CreatePlanRequest{SessionId: rf.sessionFor(ctx, c), Request: req})
	stop()
	if err != nil {
		return nil, nil, fmt.Errorf("planning failed: %w", err)
	}
	return resp.Plan, c, nil
}
