package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newScreen(a *app) *cobra.Command {
	var scrollback uint32
	cmd := &cobra.Command{
		Use:   "screen EXECUTION_ID|SESSION_ID [--scrollback N]",
		Short: "Print a PTY execution's screen as plain text",
		Long: `screen prints what a PTY execution's terminal shows now, rendered by termd
as plain text (escape codes interpreted, secrets redacted), while it runs or
after it ended; a session id means that session's running execution.
--scrollback N first prints up to N lines that scrolled off the top. -o
json adds the cursor, the size, the title and whether a
full-screen program (the alternate screen) is up.`,
		Example: `  termctl screen 7d0a...c2
  termctl screen 7d0a...c2 --scrollback 100`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(runningIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			id, err := resolveExecution(ctx, c, args[0])
			if err != nil {
				return err
			}
			r, err := c.Terminals.GetScreen(ctx, &termdv1.GetScreenRequest{ExecutionId: id, ScrollbackLines: scrollback})
			if err != nil {
				return fmt.Errorf("reading the screen of %s: %w", id, err)
			}
			if done, err := a.printData(r); done {
				return err
			}
			for _, l := range r.GetScrollback() {
				fmt.Fprintln(a.stdout, l)
			}
			if s := client.ScreenText(r.GetScreen()); s != "" {
				fmt.Fprintln(a.stdout, s)
			}
			return nil
		},
	}
	cmd.Flags().Uint32Var(&scrollback, "scrollback", 0, "also print up to `N` lines that scrolled off the top (at most 10000)")
	return cmd
}
