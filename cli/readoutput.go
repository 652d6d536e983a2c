package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// outputJSON is `termctl output -o json`.
type outputJSON struct {
	ExecutionID string `json:"execution_id"`
	Stream      string `json:"stream"`
	Offset      int64  `json:"offset"`
	NextOffset  int64  `json:"next_offset"`
	TotalBytes  int64  `json:"total_bytes"`
	Truncated   bool   `json:"truncated"`
	EOF         bool   `json:"eof"`
	Data        string `json:"data"`
}

func newOutput(a *app) *cobra.Command {
	var (
		offset int64
		stream string
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "output EXECUTION_ID [--offset N] [--stream stdout|stderr]",
		Short: "Print an execution's captured output, while it runs or after",
		Long: `output prints what an execution wrote to one stream (stdout by default) from
--offset on, as captured by termd (secrets redacted, up to the output cap).
With --follow it keeps reading until the execution ends. -o json prints one
object with the data and next_offset, to resume from.`,
		Example: `  termctl output 7d0a...c2
  termctl output 7d0a...c2 --stream stderr
  termctl output 7d0a...c2 --offset 4096 --follow`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(runningIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := parseStream(stream)
			if err != nil {
				return usageErr(err)
			}
			if offset < 0 {
				return usageErr(fmt.Errorf("--offset %d: must be 0 or more", offset))
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			res := outputJSON{ExecutionID: args[0], Stream: streamWord(st), Offset: offset, NextOffset: offset}
			var data []byte
			for {
				r, err := c.Executions.ReadOutput(ctx, &termdv1.ReadOutputRequest{ExecutionId: args[0], Stream: st, Offset: res.NextOffset, Limit: 1 << 20})
				if err != nil {
					return fmt.Errorf("reading output of %s: %w", args[0], err)
				}
				if a.output == "table" {
					if _, err := a.stdout.Write(r.Data); err != nil {
						return err
					}
				} else {
					data = append(data, r.Data...)
				}
				res.NextOffset, res.TotalBytes, res.Truncated, res.EOF = r.NextOffset, r.TotalBytes, r.Truncated, r.Eof
				if r.Eof {
					break
				}
				if len(r.Data) == 0 {
					if !follow {
						break
					}
					select {
					case <-cmd.Context().Done():
						return cmd.Context().Err()
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
			if a.output != "table" {
				res.Data = string(data)
				_, err := a.printData(res)
				return err
			}
			if res.Truncated && isTerminal(a.stderr) {
				fmt.Fprintf(a.stderr, "termctl: output was truncated at the cap (%d bytes produced in all)\n", res.TotalBytes)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&offset, "offset", 0, "start at this byte offset")
	cmd.Flags().StringVar(&stream, "stream", "stdout", "stdout or stderr")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep reading until the execution ends")
	return cmd
}
