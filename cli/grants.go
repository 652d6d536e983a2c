package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// grantScopes are the --remember words for the grant scopes: termctl
// approve reads them, grant listings print them.
var grantScopes = map[string]termdv1.GrantScope{
	"once":              termdv1.GrantScope_GRANT_SCOPE_ONCE,
	"request":           termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST,
	"session-pattern":   termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN,
	"workspace-request": termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST,
	"workspace-pattern": termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN,
}

// grantScopeWord is a scope's --remember word; "once" for one it does not know.
func grantScopeWord(s termdv1.GrantScope) string {
	for word, scope := range grantScopes {
		if scope == s {
			return word
		}
	}
	return "once"
}

// grantWhat says in a few words what a grant covers.
func grantWhat(g *termdv1.Grant) string {
	if g.RequestHash != "" && g.SessionId == "" {
		return "request " + g.RequestHash + " from any session of " + principalWord(g.Principal) + " in workspace " + g.Workspace
	}
	if g.RequestHash != "" {
		return "request " + g.RequestHash + " in session " + g.SessionId
	}
	where := "workspace " + g.Workspace
	if g.SessionId != "" {
		where = "session " + g.SessionId
	}
	return "`" + g.Pattern + "` in " + where
}

func newGrants(a *app) *cobra.Command {
	var all bool
	var session string
	list := func(cmd *cobra.Command, _ []string) error {
		resp, printed, err := call(a, cmd, "listing grants", func(ctx context.Context, c *client.Client) (*termdv1.ListGrantsResponse, error) {
			return c.Grants.ListGrants(ctx, &termdv1.ListGrantsRequest{All: all, SessionId: session})
		})
		if printed || err != nil {
			return err
		}
		return listTable(a.stdout, resp.Grants, "no active grants (an operator makes one with `termctl approve PLAN --remember ...`)", []string{"GRANT", "STATUS", "SCOPE", "COVERS", "FOR", "SESSION/WORKSPACE", "BY", "EXPIRES", "USES"}, func(g *termdv1.Grant) []string {
			covers := g.Pattern
			if g.RequestHash != "" {
				covers = "request " + g.RequestHash[:min(16, len(g.RequestHash))]
			}
			where := g.SessionId
			if where == "" {
				where = g.Workspace
			}
			return []string{g.Id, g.Status, grantScopeWord(g.Scope), covers, principalWord(g.Principal), where, principalWord(g.CreatedBy), fmtTime(g.ExpiresAt), fmt.Sprint(g.Uses)}
		})
	}
	cmd := &cobra.Command{
		Use:   "grants [list|revoke GRANT_ID]",
		Short: "List and revoke remembered approvals (grants)",
		Long: `A grant is an operator's approval remembered beyond one plan (` + "`termctl approve\nPLAN --remember ...`" + `): this exact request for the rest of a session, or a
pattern such as ` + "`git commit -m <any>`" + ` for a session or a workspace, or
this exact request from any session of the requester in its workspace for a
while (workspace-request: it survives an MCP client's restart). A plan the
policy would ask about runs without asking when an active grant covers it, and
its receipt names the grant. A grant lapses when the policy changes, ends with
its session or at its expiry, and ends at once when revoked.`,
		Example: `  termctl grants
  termctl grants list --all
  termctl grants revoke g-3f1c9e2a-41b7`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	cmd.PersistentFlags().BoolVar(&all, "all", false, "include revoked, expired and lapsed grants")
	cmd.PersistentFlags().StringVar(&session, "session", "", "only grants of this session")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List grants",
		Args:  cobra.NoArgs,
		RunE:  list,
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "revoke GRANT_ID",
		Short: "Revoke a grant at once (operators)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			resp, err := c.Grants.RevokeGrant(ctx, &termdv1.RevokeGrantRequest{GrantId: strings.TrimSpace(args[0])})
			if err != nil {
				return fmt.Errorf("revoking grant %s: %w", args[0], err)
			}
			if ok, err := a.printData(resp.Grant); ok {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "revoked grant %s (%s); plans it approved but that have not started will be refused as stale\n", resp.Grant.Id, grantWhat(resp.Grant))
			return err
		},
	})
	return cmd
}
