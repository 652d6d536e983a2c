package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newSessions(a *app) *cobra.Command {
	var all bool
	list := func(cmd *cobra.Command, _ []string) error {
		resp, printed, err := call(a, cmd, "listing sessions", func(ctx context.Context, c *client.Client) (*termdv1.ListSessionsResponse, error) {
			return c.Sessions.ListSessions(ctx, &termdv1.ListSessionsRequest{IncludeClosed: all})
		})
		if printed || err != nil {
			return err
		}
		return listTable(a.stdout, resp.Sessions, "no open sessions (termctl plan opens one)", []string{"SESSION", "OWNER", "STATE", "PLANS", "RUNNING", "LAST ACTIVE", "LABEL"}, func(s *termdv1.Session) []string {
			state := "open"
			if s.Closed {
				state = "closed"
			}
			return []string{s.Id, principalWord(s.Owner), state, fmt.Sprint(s.PlanCount), s.ActiveExecutionId, fmtTime(s.LastActiveAt), s.Label}
		})
	}
	cmd := &cobra.Command{
		Use:   "sessions [list|create|close ID]",
		Short: "List, open and close sessions",
		Long: `A session groups one principal's plans, executions, receipts and event
streams. termctl plan uses your most recent open session (or opens one), so
you rarely need to create one yourself. Closing a session cancels its running
command (which still gets a receipt) and ends its event streams.`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	cmd.PersistentFlags().BoolVar(&all, "all", false, "include closed sessions")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the sessions you may see",
		Args:  cobra.NoArgs,
		RunE:  list,
	})
	var label string
	create := &cobra.Command{
		Use:   "create [--label TEXT]",
		Short: "Open a new session",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, printed, err := call(a, cmd, "opening a session", func(ctx context.Context, c *client.Client) (*termdv1.Session, error) {
				return c.CreateSession(ctx, label)
			})
			if printed || err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s\nuse it: termctl plan --session %s -- ARGV...\n", s.Id, s.Id)
			return err
		},
	}
	create.Flags().StringVar(&label, "label", "", "a label shown in listings")
	cmd.AddCommand(create)
	cmd.AddCommand(&cobra.Command{
		Use:               "close SESSION_ID",
		Short:             "Close a session, cancelling its running command",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(openSessions),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			resp, err := c.Sessions.CloseSession(ctx, &termdv1.CloseSessionRequest{SessionId: args[0]})
			if err != nil {
				return fmt.Errorf("closing session %s: %w", args[0], err)
			}
			if ok, err := a.printData(resp.Session); ok {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "closed session %s\n", resp.Session.Id)
			return err
		},
	})
	return cmd
}
