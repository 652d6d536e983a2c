package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newRecipeShow(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "show NAME",
		Short:   "Show a recipe as written, with where it comes from",
		Args:    cobra.ExactArgs(1),
		Example: "  termctl recipe show inspect-repository\n  termctl recipe show discover-go-tests -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			resp, err := c.Recipes.GetRecipe(ctx, &termdv1.GetRecipeRequest{Name: args[0]})
			if err != nil {
				return fmt.Errorf("showing recipe %s: %w", args[0], err)
			}
			if ok, err := a.printData(resp.Recipe); ok {
				return err
			}
			fmt.Fprintf(a.stdout, "# source: %s\n", resp.Recipe.GetSource())
			_, err = fmt.Fprint(a.stdout, strings.TrimRight(resp.Text, "\n")+"\n")
			return err
		},
	}
}
