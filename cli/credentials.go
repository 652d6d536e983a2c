package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newCredentials(a *app) *cobra.Command {
	list := func(cmd *cobra.Command, _ []string) error {
		resp, printed, err := call(a, cmd, "listing credentials", func(ctx context.Context, c *client.Client) (*termdv1.ListCredentialsResponse, error) {
			return c.Policy.ListCredentials(ctx, &termdv1.ListCredentialsRequest{})
		})
		if printed || err != nil {
			return err
		}
		return listTable(a.stdout, resp.Credentials, "no credentials you may ask for (an operator defines them under credentials: in termd's config; docs/CREDENTIALS.md)", []string{"NAME", "PROGRAMS", "PRINCIPALS", "SOURCE", "INJECT", "READABLE"}, func(cr *termdv1.CredentialInfo) []string {
			source, principals := cr.Source, orAny(cr.Principals)
			if cr.Path != "" {
				source += " " + cr.Path
			}
			if source == "" {
				// Not shown to agents: where the secret lives, who else may ask.
				source, principals = "-", "-"
			}
			readable := "yes"
			if !cr.Readable {
				readable = "NO: " + cr.Problem
			}
			return []string{cr.Name, orAny(cr.Programs), principals, source, cr.Inject, readable}
		})
	}
	cmd := &cobra.Command{
		Use:   "credentials [list]",
		Short: "List the credentials a plan may ask for by name (never values)",
		Long: `A credential is a secret an operator defined in termd's config under a name
(GH_TOKEN). A plan asks for it with ` + "`--credential NAME`" + `; termd reads the value when
the command starts and puts it in the command's environment (or a private file),
redacted from its output and receipt. Nobody reads a value through termd.

credentials lists, for operators, every credential (name, the programs that
may receive it, who may ask, where the value comes from, and whether termd can
read it now), and for others the ones they may ask for: name, programs, how it
is injected and whether it can be read now; never where it is kept
(docs/CREDENTIALS.md).`,
		Example: `  termctl credentials
  termctl run --credential GH_TOKEN -- git ls-remote https://github.com/me/private.git`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	cmd.AddCommand(&cobra.Command{Use: "list", Short: "List credentials (the default)", Args: cobra.NoArgs, RunE: list})
	return cmd
}

func orAny(ss []string) string {
	if len(ss) == 0 {
		return "any"
	}
	return strings.Join(ss, ",")
}
