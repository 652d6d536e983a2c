package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newPending(a *app) *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "List plans awaiting an approval you may give",
		Long: `pending lists the plans awaiting approval that you may approve, each with the
canonical request and the request hash an approval would be for. Approve one
with ` + "`termctl approve PLAN_ID`" + ` or refuse it with ` + "`termctl deny PLAN_ID --reason TEXT`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			resp, err := c.Plans.ListPlans(ctx, &termdv1.ListPlansRequest{
				SessionId:      session,
				States:         []termdv1.PlanState{termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL},
				ApprovableOnly: true,
			})
			if err != nil {
				return fmt.Errorf("listing plans awaiting approval: %w", err)
			}
			if ok, err := a.printData(resp); ok {
				return err
			}
			if len(resp.Plans) == 0 {
				_, err := fmt.Fprintln(a.stdout, "no plans await your approval")
				return err
			}
			for i, p := range resp.Plans {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				fmt.Fprintf(a.stdout, "plan %s  risk %s  by %s  %s\n", p.Id, riskWord(p.GetDecision().GetRisk()), principalWord(p.Requester), fmtTime(p.CreatedAt))
				for _, r := range p.GetDecision().GetReasons() {
					fmt.Fprintln(a.stdout, "  why:", r)
				}
				if err := canonicalLines(a.stdout, p); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "  approve: termctl approve %s --hash %s\n", p.Id, p.GetDecision().GetRequestHash())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "only this session's plans")
	return cmd
}
