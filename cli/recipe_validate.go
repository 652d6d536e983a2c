package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newRecipeValidate(a *app) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "validate NAME|FILE",
		Short: "Check a recipe against the schema and decide each step with the live policy",
		Long: `validate checks a recipe (a catalog name, or a YAML/JSON file) against the
recipe JSON Schema and asks termd's live policy, in inspect mode, about each
step as it would run in --dir (default: the current directory). Nothing is
planned or run.

A step that writes fails naming the step; one the policy denies fails with
"step N is blocked: <reason>"; one that would need approval with "step N
unexpectedly requires approval". Exit status 0 when valid, 1 when not.`,
		Args: cobra.ExactArgs(1),
		Example: `  termctl recipe validate inspect-repository
  termctl recipe validate ./my-recipe.yaml --dir ~/src/project`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, name, text, err := a.dialRecipe(cmd, args[0])
			if err != nil {
				return err
			}
			resp, err := c.Recipes.ValidateRecipe(ctx, &termdv1.ValidateRecipeRequest{Name: name, Text: text, Dir: recipeDir(dir)})
			if err != nil {
				return fmt.Errorf("validating recipe %s: %w", args[0], err)
			}
			if ok, err := a.printData(resp); ok {
				if err == nil && !resp.Valid {
					err = exitWith(ExitError, nil)
				}
				return err
			}
			if len(resp.Steps) > 0 {
				rows := make([][]string, 0, len(resp.Steps))
				for _, s := range resp.Steps {
					problem := s.Problem
					if problem == "" {
						problem = "ok"
					}
					rows = append(rows, []string{fmt.Sprint(s.Index), s.Name, a.verdictColor(a.stdout, verdictWord(s.Verdict)), cmdline.Quote(s.Argv), problem})
				}
				if err := table(a.stdout, []string{"STEP", "NAME", "DECISION", "COMMAND", "RESULT"}, rows); err != nil {
					return err
				}
			}
			if !resp.Valid {
				msg := fmt.Sprintf("recipe %s is not valid:", args[0])
				for _, p := range resp.Problems {
					msg += "\n  " + p
				}
				return exitWith(ExitError, fmt.Errorf("%s", msg))
			}
			fmt.Fprintf(a.stdout, "recipe %s is valid: %d steps, each allowed read-only by the live policy (%s)\n",
				resp.Recipe.GetName(), len(resp.Steps), resp.Steps[0].GetCwd())
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory the steps would run in (default: the current directory)")
	return cmd
}
