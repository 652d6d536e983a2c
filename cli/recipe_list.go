package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// recipeListJSON is one line of `termctl recipe list -o json`.
type recipeListJSON struct {
	Name    string   `json:"name"`
	Title   string   `json:"title,omitempty"`
	Steps   int      `json:"steps"`
	Tags    []string `json:"tags,omitempty"`
	Source  string   `json:"source"`
	Error   string   `json:"error,omitempty"`
	Timeout uint32   `json:"timeout_seconds,omitempty"`
}

func newRecipeList(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the built-in and operator recipes",
		Args:    cobra.NoArgs,
		Example: "  termctl recipe list\n  termctl recipe list -o json | jq -r '.[].name'",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			resp, err := c.Recipes.ListRecipes(ctx, &termdv1.ListRecipesRequest{})
			if err != nil {
				return fmt.Errorf("listing recipes: %w", err)
			}
			out := make([]recipeListJSON, 0, len(resp.Recipes))
			for _, e := range resp.Recipes {
				r := e.GetRecipe()
				out = append(out, recipeListJSON{Name: r.GetName(), Title: r.GetTitle(), Steps: len(r.GetSteps()), Tags: r.GetTags(),
					Source: r.GetSource(), Error: e.GetError(), Timeout: r.GetLimits().GetTimeoutSeconds()})
			}
			if ok, err := a.printData(out); ok {
				return err
			}
			rows := make([][]string, 0, len(out))
			for _, r := range out {
				title := r.Title
				if r.Error != "" {
					title = "BROKEN: " + r.Error
				}
				rows = append(rows, []string{r.Name, strconv.Itoa(r.Steps), strings.Join(r.Tags, ","), r.Source, title})
			}
			if err := table(a.stdout, []string{"NAME", "STEPS", "TAGS", "SOURCE", "TITLE"}, rows); err != nil {
				return err
			}
			if resp.OperatorDir == "" {
				fmt.Fprintln(a.stdout, "(no operator recipe directory: set recipes_dir in termd's config to add recipes)")
			}
			return nil
		},
	}
}
