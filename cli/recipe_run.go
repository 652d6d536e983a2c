package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// recipeRunBound is how long termctl waits for a run: the schema's largest
// time limit plus room for receipts; termd holds each run to its own limit.
const recipeRunBound = 6 * time.Minute

func newRecipeRun(a *app) *cobra.Command {
	var dir, session string
	cmd := &cobra.Command{
		Use:   "run NAME|FILE",
		Short: "Run a recipe: each step as your plan, with a receipt",
		Long: `run validates the recipe again with the live policy and runs its steps in
order in --dir (default: the current directory), each as a plan of yours in
inspect mode with a signed receipt. It prints each step's output and receipt
id. The run stops at the first step that fails (unless the step is optional)
or at the recipe's time limit; output beyond the recipe's budget is cut.

Exit status: 0 every step succeeded, 1 a step failed, 125 termd refused the
recipe (a step is blocked, needs approval or writes: nothing ran).`,
		Args: cobra.ExactArgs(1),
		Example: `  termctl recipe run inspect-repository
  termctl recipe run discover-go-tests --dir ~/src/project
  termctl recipe run ./my-recipe.yaml -o json | jq '.steps[].receipt_id'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, name, text, err := a.dialRecipe(cmd, args[0])
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, recipeRunBound)
			defer cancel()
			resp, err := c.Recipes.RunRecipe(ctx, &termdv1.RunRecipeRequest{Name: name, Text: text, Dir: recipeDir(dir), SessionId: session})
			if err != nil {
				return exitWith(ExitRefused, fmt.Errorf("running recipe %s: %w", args[0], err))
			}
			if ok, err := a.printData(resp); ok {
				if err == nil && resp.Status != "succeeded" {
					err = exitWith(ExitError, nil)
				}
				return err
			}
			a.printRecipeRun(resp)
			if resp.Status != "succeeded" {
				return exitWith(ExitError, fmt.Errorf("recipe %s %s: %s", resp.Recipe, resp.Status, strings.Join(resp.Problems, "; ")))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory the steps run in (default: the current directory)")
	cmd.Flags().StringVar(&session, "session", "", "session for the steps' plans (default: a new session named after the recipe)")
	return cmd
}

func (a *app) printRecipeRun(resp *termdv1.RunRecipeResponse) {
	w := a.stdout
	for _, s := range resp.Steps {
		// grep's exit 1 (no match) is "ok" where the recipe says so.
		what := s.Status
		if s.Ok {
			what = "ok"
		}
		if s.ExitCode >= 0 {
			what += fmt.Sprintf(", exit %d", s.ExitCode)
		}
		fmt.Fprintf(w, "== step %d: %s  (%s; receipt %s)\n$ %s\n", s.Index, s.Name, what, s.ReceiptId, cmdline.Quote(s.Argv))
		if s.Stdout != "" {
			fmt.Fprint(w, strings.TrimRight(s.Stdout, "\n")+"\n")
		}
		if s.Stderr != "" {
			fmt.Fprint(w, "stderr: "+strings.ReplaceAll(strings.TrimRight(s.Stderr, "\n"), "\n", "\nstderr: ")+"\n")
		}
		if s.Truncated {
			fmt.Fprintln(w, "(output cut: the receipt holds the byte counts and digests)")
		}
	}
	fmt.Fprintf(w, "recipe %s: %s, %d steps in %s, session %s\n", resp.Recipe, resp.Status, len(resp.Steps),
		(time.Duration(resp.DurationMs) * time.Millisecond).String(), resp.SessionId)
}
