package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// newReceiptsSearch is `termctl receipts search`: full-text search over the
// receipts the caller may see.
func newReceiptsSearch(a *app) *cobra.Command {
	var (
		req    termdv1.SearchReceiptsRequest
		filter receiptFilter
	)
	cmd := &cobra.Command{
		Use:   "search PHRASE",
		Short: "Find receipts whose command, reasons or redacted output contain a phrase",
		Long: `Search the receipts you may see for a phrase in their command, the
decision's reasons, or the (redacted) output they hold. Newest first, with
a snippet around each hit; pass --page-token to see the next page.

The phrase is literal text, case-insensitive: quotes, OR, NEAR, *, - and :
are searched for as written ("a OR b" finds exactly that text). A secret
redacted from a receipt cannot be found: only the redacted text is indexed.

The index is a separate file (search.db in termd's state directory), built
from the receipts; "termctl receipts reindex" builds it again.`,
		Example: `  termctl receipts search "npm run migrate"
  termctl receipts search -- "--force"
  termctl receipts search "permission denied" --status failed --since 24h -o json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf(`give one phrase to search for, quoted: termctl receipts search "go test" (got %d arguments)`, len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Query = args[0]
			var err error
			if req.SessionId, req.Status, req.Principal, req.Since, req.Until, err = filter.values(); err != nil {
				return err
			}
			resp, printed, err := call(a, cmd, "searching receipts", func(ctx context.Context, c *client.Client) (*termdv1.SearchReceiptsResponse, error) {
				return c.Receipts.SearchReceipts(ctx, &req)
			})
			if printed || err != nil {
				return err
			}
			if resp.Incomplete {
				fmt.Fprintln(a.stderr, "note: the search index is still catching up with the receipts; newer ones may be missing")
			}
			if len(resp.Hits) == 0 {
				_, err := fmt.Fprintln(a.stdout, "no receipts match")
				return err
			}
			rows := make([][]string, 0, len(resp.Hits))
			for _, h := range resp.Hits {
				r := h.Receipt
				rows = append(rows, []string{fmt.Sprint(r.Seq), r.Id, r.Status, fmtTime(r.StartedAt), truncate(r.Command, 40), h.Field + ": " + truncate(h.Snippet, 80)})
			}
			if err := table(a.stdout, []string{"SEQ", "RECEIPT", "STATUS", "STARTED", "COMMAND", "MATCH"}, rows); err != nil {
				return err
			}
			if resp.NextPageToken != "" {
				_, err = fmt.Fprintf(a.stdout, "more: termctl receipts search %q --page-token %s\n", req.Query, resp.NextPageToken)
			}
			return err
		},
	}
	filter.flags(cmd)
	f := cmd.Flags()
	f.Int32Var(&req.Limit, "limit", 20, "hits per page (at most 100)")
	f.StringVar(&req.PageToken, "page-token", "", "the next page: the token the previous page printed")
	return cmd
}

// reindexTimeout bounds a rebuild (every receipt is read once).
const reindexTimeout = 30 * time.Minute

// newReceiptsReindex is `termctl receipts reindex` (operators).
func newReceiptsReindex(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "reindex",
		Short: "Build the search index again from the receipts (operators)",
		Long: `Throw away termd's search index (search.db in the state directory) and
build it again from every receipt the store holds. termd keeps the index up
to date by itself and rebuilds a missing or corrupt one at start; use this
after restoring a backup or when searches look wrong. The receipts and
their chain are only read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), reindexTimeout)
			defer cancel()
			stop := a.spin("indexing receipts")
			r, err := c.Receipts.ReindexReceipts(ctx, &termdv1.ReindexReceiptsRequest{})
			stop()
			if err != nil {
				return fmt.Errorf("rebuilding the search index: %w", err)
			}
			if ok, err := a.printData(r); ok {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "search index rebuilt: %d receipts indexed\n", r.Indexed)
			return err
		},
	}
}
