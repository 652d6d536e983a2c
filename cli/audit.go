package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newAudit(a *app) *cobra.Command {
	var expect string
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

It prints the chain's head (seq and hash). Receipts removed from the end leave
a shorter chain that is still valid, so keep the head somewhere else (a log,
a ticket) and pass it back later: --expect SEQ:HASH fails unless the chain
still holds exactly that receipt at that seq.

After ` + "`termctl receipts prune`" + ` the chain starts at a signed checkpoint of
the pruned head: verify checks its signature and that the first kept receipt
links to it, and fails on a chain that starts without one.

Exit status: 0 when the chain is intact, 1 otherwise, with the first bad seq
and what is wrong with it.`,
		Example: `  termctl audit verify
  termctl audit verify --expect 1042:9f2c...e1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &termdv1.VerifyAuditChainRequest{}
			if expect != "" {
				seq, hash, ok := strings.Cut(expect, ":")
				n, err := strconv.ParseInt(seq, 10, 64)
				if !ok || err != nil || n < 1 || len(hash) != 64 {
					return exitWith(ExitUsage, fmt.Errorf("--expect %q: write SEQ:HASH as printed by an earlier `termctl audit verify`", expect))
				}
				req.ExpectSeq, req.ExpectHash = n, hash
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			stop := a.spin("verifying the receipt chain")
			r, err := c.Receipts.VerifyAuditChain(ctx, req)
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
			if r.PrunedThrough > 0 {
				_, err = fmt.Fprintf(a.stdout, "audit chain ok: %d receipts checked from a signed checkpoint of seq 1–%d (pruned)\nhead: %d:%s\n", r.Checked, r.PrunedThrough, r.HeadSeq, r.HeadHash)
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "audit chain ok: %d receipts checked\nhead: %d:%s\n", r.Checked, r.HeadSeq, r.HeadHash)
			return err
		},
	})
	cmd.Commands()[0].Flags().StringVar(&expect, "expect", "", "a head recorded earlier (SEQ:HASH) that must still be in the chain")
	return cmd
}
