package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newRun(a *app) *cobra.Command {
	var (
		rf     requestFlags
		yes    bool
		detach bool
		tty    bool
	)
	cmd := &cobra.Command{
		Use:   "run [--yes] [--detach] [--tty] [flags] -- ARGV...",
		Short: "Plan, approve (when you may) and execute a command, streaming its output",
		Long: `run is plan + approve + execute --follow in one step. The decision is shown on
stderr; the command's stdout and stderr stream to yours, and termctl exits
with the command's exit code (124 timed out, 130 cancelled, 125 refused or
termctl's own failure, 126 could not start: run never exits 1 or 2 itself).
With -o json (or yaml) the output is held and one document is printed at the
end: plan_id, verdict, state, exit_code (null when none), stdout, stderr,
stdout_bytes, receipt_id and, when nothing ran, error and reasons.

The command belongs to this termctl: when termctl goes away before it ends
(Ctrl-C, a closed terminal, a broken pipe as in ` + "`termctl run -- yes | head`" + `,
a kill), termd cancels it and writes its receipt. With --detach the command
is started and termctl returns at once, printing its execution id; it keeps
running until it ends (read it with termctl output, stop it with termctl cancel).

Several termctl runs of one user may run at once (two terminals share the
user's termctl session; sessions.max_running caps how many run together).

When the plan needs approval:
  - on a terminal, an operator is shown the canonical request and asked;
  - --yes approves without asking, but only if you may approve it;
  - otherwise (a script, or an agent) run stops with exit 125 and prints the
    plan id and the command an operator runs to approve it.
A blocked plan prints the policy's reasons and exits 125.

With --tty the command runs on a pseudo-terminal of your terminal's size
(docs/TERMINALS.md) and termctl attaches to it (as ` + "`termctl attach`" + `): what you
type goes to the program, Ctrl-] then d detaches and leaves it running. A
REPL (python3, node, psql, ...) asks for approval, since what is typed into
it is code; programs the policy does not mark interactive-safe ask too.
With --detach it starts and prints its execution id: drive it with
` + "`termctl send`" + ` and read it with ` + "`termctl screen`" + `.`,
		Example: `  termctl run -- ls -la
  termctl run --timeout 10m -- make test
  termctl run --detach -- make build       # start it and return; it keeps running
  termctl run --yes -- touch notes.txt      # operators: approve without asking
  termctl run -o json -- go test ./... | jq .exit_code
  termctl run --tty -- python3              # a REPL (asks for approval)
  termctl run --tty --detach -- less notes.txt`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tty {
				if a.output != "table" && !detach {
					return exitWith(ExitRefused, fmt.Errorf("--tty attaches your terminal; -o %s works only with --detach", a.output))
				}
				rows, cols := a.localSize()
				rf.tty = &termdv1.TerminalOptions{Rows: rows, Cols: cols}
			}
			res := &runResult{}
			return a.reportRun(res, a.run(cmd, &rf, args, yes, detach, res))
		},
	}
	rf.register(cmd, true, true)
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run on a pseudo-terminal of your terminal's size and attach to it")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve without asking when you may approve (operators)")
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "start the command and return at once; it keeps running after termctl exits")
	// run's own usage errors exit 125 too: 2 is the command's.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exitWith(ExitRefused, fmt.Errorf("%w (see `%s --help`)", err, c.CommandPath()))
	})
	return cmd
}

func (a *app) run(cmd *cobra.Command, rf *requestFlags, args []string, yes, detach bool, res *runResult) error {
	p, c, err := a.plan(cmd, rf, args)
	if err != nil {
		return err
	}
	res.PlanID, res.Plan = p.Id, p
	d := p.GetDecision()
	w := a.stderr
	fmt.Fprintf(w, "termctl: plan %s: %s (risk %s): %s\n", p.Id, a.verdictColor(w, verdictWord(d.GetVerdict())), riskWord(d.GetRisk()), cmdline.Quote(d.GetArgv()))
	switch p.State {
	case termdv1.PlanState_PLAN_STATE_PLANNED, termdv1.PlanState_PLAN_STATE_APPROVED:
	case termdv1.PlanState_PLAN_STATE_BLOCKED, termdv1.PlanState_PLAN_STATE_DENIED:
		for _, r := range d.GetReasons() {
			fmt.Fprintln(w, "  -", r)
		}
		return exitWith(ExitRefused, fmt.Errorf("plan %s is %s by policy; nothing ran", p.Id, planStateWord(p.State)))
	case termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL:
		if err := a.approveForRun(cmd.Context(), c, p, yes); err != nil {
			return err
		}
	default:
		return exitWith(ExitRefused, fmt.Errorf("plan %s is %s; nothing ran", p.Id, planStateWord(p.State)))
	}
	if detach {
		err := a.detached(cmd.Context(), c, p.Id)
		res.printed = err == nil // detached printed the execution itself
		return err
	}
	if rf.tty != nil {
		resp, err := c.Executions.Execute(cmd.Context(), &termdv1.ExecuteRequest{PlanId: p.Id})
		if err != nil {
			return refusal(p.Id, err)
		}
		res.printed = true // the terminal showed it
		return a.attach(cmd.Context(), c, resp.GetExecution().GetId(), false)
	}
	return a.follow(cmd.Context(), c, p.Id, res)
}

// approveForRun gets a plan awaiting approval approved, or says how to.
func (a *app) approveForRun(ctx context.Context, c *client.Client, p *termdv1.Plan, yes bool) error {
	w := a.stderr
	for _, r := range p.GetDecision().GetReasons() {
		fmt.Fprintln(w, "  -", r)
	}
	stopHere := func(why string) error {
		then := fmt.Sprintf("`termctl execute %s --follow`", p.Id)
		if p.GetRequest().GetTty() != nil {
			then = fmt.Sprintf("`termctl execute %s` and `termctl attach EXECUTION_ID`", p.Id)
		}
		return exitWith(ExitRefused, fmt.Errorf("plan %s needs approval%s: an operator runs `termctl approve %s`, then %s", p.Id, why, p.Id, then))
	}
	interactive := isTerminal(a.stdin) && isTerminal(a.stderr)
	if !yes && !interactive {
		return stopHere("")
	}
	if !yes {
		// Only operators can approve; do not ask anyone else.
		sctx, cancel := context.WithTimeout(ctx, a.timeout())
		st, err := c.Status(sctx)
		cancel()
		if err != nil {
			return err
		}
		if st.GetCaller().GetRole() != termdv1.Role_ROLE_OPERATOR {
			return stopHere(" and you are not an operator")
		}
		fmt.Fprintln(w, "approve this canonical request?")
		if err := canonicalLines(w, p); err != nil {
			return err
		}
		fmt.Fprint(w, "approve and run? [y/N] ")
		line, _ := bufio.NewReader(a.stdin).ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
		default:
			return stopHere(" (not approved here)")
		}
	}
	actx, cancel := context.WithTimeout(ctx, a.timeout())
	defer cancel()
	_, err := c.Plans.ApprovePlan(actx, &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.GetDecision().GetRequestHash()})
	if err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && (ce.Code == codes.PermissionDenied || ce.Code == codes.FailedPrecondition) {
			return exitWith(ExitRefused, fmt.Errorf("you may not approve plan %s (%s): an operator runs `termctl approve %s`, then `termctl execute %s --follow`", p.Id, ce.Message, p.Id, p.Id))
		}
		return fmt.Errorf("approving plan %s: %w", p.Id, err)
	}
	fmt.Fprintf(w, "termctl: approved plan %s (request hash %s)\n", p.Id, p.GetDecision().GetRequestHash())
	return nil
}
