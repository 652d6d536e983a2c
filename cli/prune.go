package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// newReceiptsPrune is `termctl receipts prune`: retention for operators.
func newReceiptsPrune(a *app) *cobra.Command {
	var before string
	cmd := &cobra.Command{
		Use:   "prune --before DATE",
		Short: "Remove receipts older than DATE, leaving a signed checkpoint (operators)",
		Long: `prune removes the oldest receipts, those that started before DATE, from the
start of the chain (up to the first receipt that is not older), and writes a
signed checkpoint in their place: the last pruned receipt's seq and hash, how
many were removed and the time range they covered. ` + "`termctl audit verify`" + `
checks the checkpoint's signature and that the first kept receipt links to it,
so the chain still proves continuity from there on.

termd verifies the whole chain first and refuses to prune one that is broken.
The prune is one durable transaction: a crash leaves either the old chain or
the checkpoint and the shorter chain. Pruned receipts are gone from termd:
export them first if you keep them elsewhere
(termctl receipts export --all --until DATE > old.jsonl).

The database file keeps its size; new receipts reuse the freed space.`,
		Example: `  termctl receipts export --all --until 2026-01-01 > receipts-2025.jsonl
  termctl receipts prune --before 2026-01-01
  termctl receipts prune --before 2160h      # older than 90 days`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if before == "" {
				return usageErr(fmt.Errorf("--before DATE is required: receipts that started before it are pruned (2026-01-01, RFC 3339, or a duration ago such as 2160h)"))
			}
			ts, err := parseWhen("--before", before)
			if err != nil {
				return err
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			stop := a.spin("verifying the chain and pruning")
			r, err := c.Receipts.PruneReceipts(ctx, &termdv1.PruneReceiptsRequest{Before: ts})
			stop()
			if err != nil {
				return fmt.Errorf("pruning receipts: %w", err)
			}
			if ok, err := a.printData(r); ok {
				return err
			}
			if r.NothingPruned {
				_, err := fmt.Fprintf(a.stdout, "nothing to prune: the oldest receipt started on or after %s (%d receipts kept)\n", fmtTime(ts), r.ReceiptsLeft)
				return err
			}
			return kv(a.stdout,
				"pruned", fmt.Sprintf("%d receipts (seq %d–%d)", r.Pruned, r.FirstSeq, r.HeadSeq),
				"started", fmtTime(r.From)+" – "+fmtTime(r.Until),
				"checkpoint", fmt.Sprintf("%d:%s", r.HeadSeq, r.HeadHash),
				"kept", fmt.Sprint(r.ReceiptsLeft))
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "prune receipts that started before then: 2006-01-02, RFC 3339, or a duration ago (2160h)")
	return cmd
}
