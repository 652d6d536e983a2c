package daemon

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/termd/termd/daemon/policy"
)

func init() {
	subcommands = append(subcommands, newPolicyCmd)
}

// newPolicyCmd is `termd policy lint FILE`: the policy engine lives in
// termd, so a file is linted here with no daemon running (`termctl policy
// lint` asks a running termd the same question).
func newPolicyCmd(Deps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check a policy file offline",
		Args:  cobra.NoArgs,
	}
	var output string
	lint := &cobra.Command{
		Use:   "lint FILE",
		Short: "Check a policy file offline, examples included (no daemon needed)",
		Long: `lint loads a policy file the way termd would, validating it strictly and
checking every example it carries (match / not_match), and prints the first
problem as FILE:LINE: reason. It needs no daemon: lint before you install or
reload (` + "`termctl policy lint FILE`" + ` asks a running termd the same).`,
		Example: `  termd policy lint /etc/termd/policy.yaml && termctl policy reload`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o: %q is not text or json", output)
			}
			if err := policy.Lint(args[0]); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				return json.NewEncoder(w).Encode(map[string]any{"file": args[0], "ok": true})
			}
			_, err := fmt.Fprintf(w, "%s: ok\n", args[0])
			return err
		},
	}
	lint.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.AddCommand(lint)
	return cmd
}
