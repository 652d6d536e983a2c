package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newDeny(a *app) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "deny PLAN_ID --reason TEXT",
		Short: "Refuse a plan awaiting approval, saying why (operators)",
		Long: `deny refuses a plan that is awaiting approval. The reason is recorded with the
plan and in its signed receipt, and the requester sees it.`,
		Example:           `  termctl deny 3f1c...e9 --reason "touches the release branch; ask first"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(awaitingPlans),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErr(errors.New("--reason is required: say why, the requester will read it"))
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			resp, err := c.Plans.DenyPlan(ctx, &termdv1.DenyPlanRequest{PlanId: args[0], Reason: reason})
			if err != nil {
				return fmt.Errorf("denying plan %s: %w", args[0], err)
			}
			if ok, err := a.printData(resp.Plan); ok {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "denied plan %s (%s): %s\n", resp.Plan.Id, cmdline.Quote(resp.Plan.GetDecision().GetArgv()), reason)
			return err
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the plan is refused (required)")
	return cmd
}
