package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// activeStates are what `termctl ps` lists by default: what is still going.
var activeStates = []termdv1.ExecutionState{termdv1.ExecutionState_EXECUTION_STATE_RUNNING, termdv1.ExecutionState_EXECUTION_STATE_PAUSED}

func newPs(a *app) *cobra.Command {
	var (
		all     bool
		session string
		states  []string
		limit   int32
	)
	cmd := &cobra.Command{
		Use:   "ps [--all] [--state STATE]... [--session ID]",
		Short: "List running executions (yours; an operator's: everyone's)",
		Long: `ps lists the executions you may see that are still running or paused, newest
first: what you started in the background (termctl run --detach, execute
without --follow, the MCP bridge, the console) and left running. An agent sees
its own sessions' executions; operators and viewers see every session's.

--all lists every state, including executions that ended since termd started
(older ones are in termctl receipts list); --state picks states (running,
paused, succeeded, failed, timed_out, cancelled, killed, outcome_unknown,
output_limit; repeat it or separate with commas). Read an execution's output
with termctl output ID --offset N, stop it with termctl cancel ID.`,
		Example: `  termctl ps
  termctl ps --all --limit 20
  termctl ps --state failed,timed_out -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &termdv1.ListExecutionsRequest{SessionId: session, Limit: limit}
			if limit < 0 {
				return usageErr(fmt.Errorf("--limit %d: must be 0 (the default, 100) or more", limit))
			}
			for _, s := range states {
				for _, w := range strings.Split(s, ",") {
					st, ok := termdv1.ExecutionState_value["EXECUTION_STATE_"+strings.ToUpper(strings.TrimSpace(w))]
					if !ok || st == 0 {
						return usageErr(fmt.Errorf("--state %q: choose running, paused, succeeded, failed, timed_out, cancelled, killed, outcome_unknown or output_limit", w))
					}
					req.States = append(req.States, termdv1.ExecutionState(st))
				}
			}
			if all && len(req.States) > 0 {
				return usageErr(fmt.Errorf("--all lists every state; give it or --state, not both"))
			}
			if !all && len(req.States) == 0 {
				req.States = activeStates
			}
			resp, printed, err := call(a, cmd, "listing executions", func(ctx context.Context, c *client.Client) (*termdv1.ListExecutionsResponse, error) {
				return c.Executions.ListExecutions(ctx, req)
			})
			if printed || err != nil {
				return err
			}
			what := "running"
			if all || len(states) > 0 {
				what = "matching"
			}
			return listTable(a.stdout, resp.Executions, fmt.Sprintf("no %s executions (termctl ps --all lists those that ended since termd started)", what), []string{"EXECUTION", "STATE", "STARTED", "TIME", "OWNER", "SESSION", "COMMAND"}, func(le *termdv1.ListedExecution) []string {
				e := le.GetExecution()
				return []string{e.GetId(), execStateWord(e.GetState()), fmtTime(e.GetStartedAt()), runFor(e), principalWord(le.GetRequester()), e.GetSessionId(), cmdline.Quote(le.GetArgv())}
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every state, including executions that ended since termd started")
	cmd.Flags().StringSliceVar(&states, "state", nil, "only these states (running, paused, succeeded, failed, ...)")
	cmd.Flags().StringVar(&session, "session", "", "only this session's executions")
	cmd.Flags().Int32Var(&limit, "limit", 0, "at most this many (default 100, at most 1000)")
	return cmd
}

// runFor is how long an execution ran, or has run so far.
func runFor(e *termdv1.Execution) string {
	if e.GetFinishedAt() != nil {
		return (time.Duration(e.GetDurationMs()) * time.Millisecond).Round(time.Millisecond).String()
	}
	if e.GetStartedAt() == nil {
		return ""
	}
	return time.Since(e.GetStartedAt().AsTime()).Round(time.Second).String()
}
