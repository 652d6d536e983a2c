package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newApprove(a *app) *cobra.Command {
	var hash string
	cmd := &cobra.Command{
		Use:   "approve PLAN_ID",
		Short: "Approve a plan awaiting approval (operators)",
		Long: `approve approves one plan that is awaiting approval, for exactly the canonical
request it shows: argv, resolved program and its hash, working directory,
environment, mode and limits, summed up by the request hash. If the plan
changes (a replan), the hash changes and this approval does not carry over.

Only operators approve, and an agent's plan cannot be approved by that same
agent. Pass --hash to approve only if the plan still has the hash you saw in
` + "`termctl pending`" + `.`,
		Example: `  termctl pending
  termctl approve 3f1c...e9
  termctl approve 3f1c...e9 --hash 9b2e...41`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(awaitingPlans),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			got, err := c.Plans.GetPlan(ctx, &termdv1.GetPlanRequest{PlanId: args[0]})
			if err != nil {
				return fmt.Errorf("reading plan %s: %w", args[0], err)
			}
			p := got.Plan
			want := p.GetDecision().GetRequestHash()
			if hash != "" && hash != want {
				return exitWith(ExitRefused, fmt.Errorf("plan %s now has request hash %s, not the %s you gave: review it again with `termctl pending`", p.Id, want, hash))
			}
			resp, err := c.Plans.ApprovePlan(ctx, &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: want})
			if err != nil {
				return fmt.Errorf("approving plan %s: %w", p.Id, err)
			}
			if ok, err := a.printData(resp.Plan); ok {
				return err
			}
			fmt.Fprintf(a.stdout, "approved plan %s for this canonical request:\n", p.Id)
			if err := canonicalLines(a.stdout, resp.Plan); err != nil {
				return err
			}
			if exp := fmtTime(resp.Plan.ExpiresAt); exp != "" {
				fmt.Fprintf(a.stdout, "the approval is good once, until %s\n", exp)
			}
			fmt.Fprintf(a.stdout, "next: termctl execute %s --follow\n", p.Id)
			return nil
		},
	}
	cmd.Flags().StringVar(&hash, "hash", "", "approve only if the plan's request hash is this one")
	return cmd
}
