package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func init() { verbs = append(verbs, newAudit) }

func newAudit(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify the receipt chain",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "verify",
		Short: "Check every receipt's signature and chain link; name the first bad seq",
		Long: `verify asks termd to walk its whole receipt chain: each receipt's signatures,
and that each one's prev_hash is the hash of the one before. A changed,
removed or reordered receipt breaks the chain at that point.

Exit status: 0 when the chain is intact, 1 otherwise, with the first bad seq
and what is wrong with it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			stop := a.spin("verifying the receipt chain")
			r, err := c.Receipts.VerifyAuditChain(ctx, &termdv1.VerifyAuditChainRequest{})
			stop()
			if err != nil {
				return fmt.Errorf("verifying the audit chain: %w", err)
			}
			if ok, err := a.printData(r); ok {
				if err == nil && !r.Ok {
					err = exitWith(ExitError, fmt.Errorf("audit chain broken at seq %d: %s", r.BadSeq, r.Problem))
				}
				return err
			}
			if !r.Ok {
				return exitWith(ExitError, fmt.Errorf("audit chain broken at seq %d: %s (%d receipts checked before it)", r.BadSeq, r.Problem, r.Checked))
			}
			_, err = fmt.Fprintf(a.stdout, "audit chain ok: %d receipts checked\n", r.Checked)
			return err
		},
	})
	return cmd
}
