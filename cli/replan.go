package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newReplan(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "replan PLAN_ID",
		Short: "Decide a plan's request again, as a new plan",
		Long: `replan copies a plan's request into a new plan that policy decides afresh:
use it when termd refused a plan as stale (the program, working directory or
policy changed since it was planned) or when an approval expired. The new plan
has its own id and request hash and needs its own approval when it asks for one.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(anyPlans),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			p, err := c.Replan(ctx, args[0])
			if err != nil {
				return fmt.Errorf("replanning %s: %w", args[0], err)
			}
			if ok, err := a.printData(p); ok {
				return err
			}
			return a.printPlan(a.stdout, p)
		},
	}
}
