package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newExecute(a *app) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "execute PLAN_ID [--follow]",
		Short: "Run a plan that may run (allowed, or approved)",
		Long: `execute runs a plan. termd runs only plans that policy allowed or that an
operator approved, and re-checks before it starts that nothing changed
(program, working directory, policy); otherwise it refuses (exit 125).

With --follow, the command's stdout and stderr stream to yours as it runs and
termctl exits with the command's exit code: 124 when it timed out, 130 when it
was cancelled, 125 when termd refused to run it or termctl failed, 126 when it
could not be started. With -o json the output is held and printed at the end
in one JSON document (plan, state, exit_code, stdout, stderr, receipt_id). The execution belongs to
this termctl: Ctrl-C, a closed terminal, a broken pipe (| head) or killing
termctl cancels it, and it still gets a receipt. Without --follow, termctl prints the execution's id and returns
at once; the command keeps running.`,
		Example: `  termctl execute 3f1c...e9 --follow
  termctl execute 3f1c...e9          # start it and return
  termctl output EXECUTION_ID        # read its output later`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(runnablePlans),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, err := a.dial(cmd)
			if follow {
				res := &runResult{PlanID: args[0]}
				if err == nil {
					err = a.follow(ctx, c, args[0], res)
				}
				return a.reportRun(res, err)
			}
			if err != nil {
				return err
			}
			return a.detached(ctx, c, args[0])
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream the output and exit with the command's exit code")
	return cmd
}

// detached starts a plan and returns at once: the execution is the daemon's
// and keeps running whatever happens to this termctl.
func (a *app) detached(ctx context.Context, c *client.Client, planID string) error {
	resp, err := c.Executions.Execute(ctx, &termdv1.ExecuteRequest{PlanId: planID})
	if err != nil {
		return refusal(planID, err)
	}
	ex := resp.Execution
	if ok, err := a.printData(ex); ok {
		return err
	}
	if err := printExecution(a, ex); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "watch it: termctl watch %s\nread its output: termctl output %s\ncancel it: termctl cancel %s\n", ex.SessionId, ex.Id, ex.Id)
	return nil
}

func printExecution(a *app, ex *termdv1.Execution) error {
	exit := ""
	switch ex.State {
	case termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED, termdv1.ExecutionState_EXECUTION_STATE_FAILED:
		exit = fmt.Sprint(ex.ExitCode)
	}
	dur := ""
	if ex.DurationMs > 0 {
		dur = fmt.Sprintf("%dms", ex.DurationMs)
	}
	pid := ""
	if ex.Pid > 0 {
		pid = fmt.Sprint(ex.Pid)
	}
	return kv(a.stdout,
		"execution", ex.Id,
		"plan", ex.PlanId,
		"session", ex.SessionId,
		"state", execStateWord(ex.State),
		"pid", pid,
		"started", fmtTime(ex.StartedAt),
		"finished", fmtTime(ex.FinishedAt),
		"duration", dur,
		"exit code", exit,
		"signal", ex.Signal,
		"stdout bytes", fmt.Sprint(ex.StdoutBytes),
		"stderr bytes", fmt.Sprint(ex.StderrBytes),
		"truncated", map[bool]string{true: "yes"}[ex.OutputTruncated],
		"receipt", ex.ReceiptId,
		"error", ex.Error,
	)
}
