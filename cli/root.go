// Package cli is termctl: one file per verb, each a thin layer over client/.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/buildinfo"
	"github.com/termd/termd/internal/entry"
	"github.com/termd/termd/internal/wire"
)

// Exit codes (documented in `termctl --help`).
const (
	ExitOK       = 0
	ExitError    = 1
	ExitUsage    = 2
	ExitAsk      = 3
	ExitDeny     = 4
	ExitTimedOut = 124
	ExitRefused  = 125
	// ExitNotStarted: run / execute --follow: the command was decided and
	// allowed but could not be started (as docker run's 126).
	ExitNotStarted = 126
	ExitCancelled  = 130
	// ExitOutputLimit: the command wrote more than the policy's output
	// budget and termd ended it (141 = 128+SIGPIPE, as if its reader had
	// gone away).
	ExitOutputLimit = 141
)

// exitError carries an exit code up to Main.
type exitError struct {
	code    int
	err     error
	command bool // the code is the command's own (run, execute --follow)
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// ExitCode is the process exit code (internal/entry.Run).
func (e *exitError) ExitCode() int { return e.code }

func exitWith(code int, err error) error { return &exitError{code: code, err: err} }

// commandExit is the exit code of the command termctl ran for the user.
func commandExit(code int) error { return &exitError{code: code, command: true} }

// app is the state shared by every verb.
type app struct {
	socket  string
	remote  remote
	output  string
	noColor bool
	stdout  io.Writer
	stderr  io.Writer
	stdin   io.Reader
	c       *client.Client
}

// callTimeout bounds each unary call to termd (streams run until they end).
const callTimeout = 30 * time.Second

// dial connects to termd, once per termctl run, and returns the context a
// verb's calls use: the command's own (Ctrl-C ends it), while the client
// gives every unary call its own deadline (callTimeout), so a verb that
// waits for a person between calls does not run out of time.
func (a *app) dial(cmd *cobra.Command) (context.Context, *client.Client, error) {
	if a.c == nil {
		c, err := a.remote.dial(a.socket, client.Options{CallTimeout: callTimeout})
		if err != nil {
			return nil, nil, err
		}
		a.c = c
	}
	return cmd.Context(), a.c, nil
}

// call dials termd and makes one call; what names it in an error ("listing
// receipts: ..."). printed is true when -o json|yaml printed the answer
// (err is then the printing's), so the caller is done.
func call[T any](a *app, cmd *cobra.Command, what string, rpc func(context.Context, *client.Client) (T, error)) (resp T, printed bool, err error) {
	ctx, c, err := a.dial(cmd)
	if err != nil {
		return resp, false, err
	}
	if resp, err = rpc(ctx, c); err != nil {
		return resp, false, fmt.Errorf("%s: %w", what, err)
	}
	printed, err = a.printData(resp)
	return resp, printed, err
}

const rootLong = `termctl talks to termd, the command broker: plan a command, see the policy's
decision, approve it (operators), execute it, and verify its signed receipt.

  termctl plan -- ls -la          decide a command and record it as a plan
  termctl approve PLAN_ID         approve a plan awaiting approval (operators)
  termctl execute PLAN_ID --follow   run it and stream its output
  termctl run -- make test        plan + approve (when you may) + execute, in one go
  termctl receipts list           see what ran, signed

Exit codes:
  0    success (for execute/run: the command exited 0)
  1    an error (termd unreachable, not found, ...); the message says what to do
  2    usage error
  3    policy check: the command needs approval (ask)
  4    policy check: the command is denied
  N    execute --follow / run: the command's own exit code, except:
  124  the command timed out
  125  nothing ran, or termd lost it: termd refused it (denied, blocked, stale,
       needs approval), or termctl failed (bad flags, termd unreachable);
       run and execute --follow never exit 1 or 2 for their own failures
  126  the command was allowed but could not be started
  130  the command was cancelled
  141  the command wrote more than the policy's output budget and was ended

The socket is --socket, else $TERMD_SOCKET, else the default path. A termd on
another host (its listen_tls) is --daemon tls://HOST:PORT (env TERMD_ADDR) with
--tls-cert, --tls-key and --tls-ca (env TERMD_TLS_CERT, TERMD_TLS_KEY, TERMD_TLS_CA).`

// NewRoot builds the termctl command tree.
func NewRoot(stdout, stderr io.Writer, stdin io.Reader) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr, stdin: stdin}
	root := &cobra.Command{
		Use:   "termctl",
		Short: "termctl: plan, approve, execute and verify commands through termd",
		Long:  rootLong,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch a.output {
			case "table", "json", "yaml":
			default:
				return exitWith(ExitUsage, fmt.Errorf("-o %q: choose table, json or yaml", a.output))
			}
			if os.Getenv("NO_COLOR") != "" {
				a.noColor = true
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(stdin)
	pf := root.PersistentFlags()
	pf.StringVar(&a.socket, "socket", wire.DefaultSocket(), "termd's unix socket (env TERMD_SOCKET)")
	a.remote.flags(root)
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table, json or yaml")
	pf.BoolVar(&a.noColor, "no-color", false, "no colour in output (also NO_COLOR=1)")
	_ = root.RegisterFlagCompletionFunc("output", completeWords("table", "json", "yaml"))
	root.AddGroup(
		&cobra.Group{ID: "run", Title: "Plan and run commands:"},
		&cobra.Group{ID: "approve", Title: "Approve (operators):"},
		&cobra.Group{ID: "evidence", Title: "Policy, receipts and audit:"},
		&cobra.Group{ID: "more", Title: "More:"},
	)
	for _, v := range verbs {
		cmd := v.new(a)
		cmd.GroupID = v.group
		root.AddCommand(cmd)
	}
	root.SetHelpCommandGroupID("more")
	root.SetCompletionCommandGroupID("more")
	for _, c := range root.Commands() {
		strictGroup(root, c)
	}
	return entry.Prepare(root, buildinfo.String())
}

// strictGroup makes a verb that only groups subcommands (`receipts`,
// `receipt`, `policy`, `audit`) refuse an unknown subcommand with a usage
// error and a suggestion, instead of printing its help and exiting 0
// (`termctl receipts verify f.json && echo ok` printed "ok").
func strictGroup(root, c *cobra.Command) {
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		msg := fmt.Sprintf("%q is not a subcommand of `termctl %s` (it has: %s)", args[0], cmd.Name(), strings.Join(names, ", "))
		// A sibling verb may have it (receipts/receipt): the closest name first.
		var near, far []string
		for _, other := range root.Commands() {
			if other == cmd {
				continue
			}
			for _, sub := range other.Commands() {
				if sub.Name() != args[0] {
					continue
				}
				s := fmt.Sprintf("`termctl %s %s`", other.Name(), sub.Name())
				if strings.HasPrefix(other.Name(), cmd.Name()) || strings.HasPrefix(cmd.Name(), other.Name()) {
					near = append(near, s)
				} else {
					far = append(far, s)
				}
			}
		}
		if all := append(near, far...); len(all) > 0 {
			msg += "; did you mean " + strings.Join(all, " or ") + "?"
		}
		return exitWith(ExitUsage, errors.New(msg))
	}
}

// verbs are termctl's commands (one file each), with the heading each is
// listed under in `termctl --help`. A verb file adds nothing by itself: a
// command is registered here or not at all.
var verbs = []struct {
	group string
	new   func(*app) *cobra.Command
}{
	{"run", newPlan}, {"run", newRun}, {"run", newExecute}, {"run", newOutput}, {"run", newPs}, {"run", newWatch},
	{"run", newPause}, {"run", newResume}, {"run", newCancel}, {"run", newReplan}, {"run", newSessions}, {"run", newRecipe},
	{"run", newAttach}, {"run", newSend}, {"run", newScreen}, {"run", newPortForward},
	{"approve", newPending}, {"approve", newApprove}, {"approve", newDeny}, {"approve", newGrants},
	{"evidence", newPolicy}, {"evidence", newReceipts}, {"evidence", newReceipt}, {"evidence", newAudit},
	{"more", newAsk}, {"more", newStatus}, {"more", newVersion}, {"more", newCredentials},
}

// Main runs termctl with the process's arguments and returns the exit code.
func Main(args []string) int {
	return entry.Run(NewRoot(os.Stdout, os.Stderr, os.Stdin), args, os.Stderr)
}
