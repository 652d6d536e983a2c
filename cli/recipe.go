package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	"github.com/termd/termd/recipe"
)

func newRecipe(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recipe",
		Short: "List, show, validate and run recipes (named inspect-only command sequences)",
		Long: `Recipes are named, inspect-only sequences of commands: termd's built-in
catalog (inspect-repository, discover-go-tests, ...) plus the operator's
recipe directory (config recipes_dir). termd decides every step with the live
policy in inspect mode when a recipe is validated and again when it runs; a
step that would write, need approval or be denied stops the recipe before
anything runs. Each step runs as your own plan and leaves a signed receipt.
The format and its JSON Schema: docs/RECIPES.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newRecipeList(a), newRecipeShow(a), newRecipeValidate(a), newRecipeRun(a))
	return cmd
}

// dialRecipe reads a recipe argument (recipeArg: a malformed file is
// reported before termd is asked anything) and connects to termd, for the
// verbs that send a recipe (validate, run).
func (a *app) dialRecipe(cmd *cobra.Command, arg string) (ctx context.Context, c *client.Client, name, text string, err error) {
	if name, text, err = recipeArg(arg); err != nil {
		return nil, nil, "", "", err
	}
	ctx, c, err = a.dial(cmd)
	return ctx, c, name, text, err
}

// recipeArg says whether a recipe argument is a file (read here, sent as
// text) or a catalog name: a path with a separator or a recipe extension,
// or an existing file, is a file.
func recipeArg(arg string) (name, text string, err error) {
	ext := filepath.Ext(arg)
	isFile := strings.ContainsRune(arg, os.PathSeparator) || ext == ".yaml" || ext == ".yml" || ext == ".json"
	if !isFile {
		if st, err := os.Stat(arg); err == nil && st.Mode().IsRegular() {
			isFile = true
		}
	}
	if !isFile {
		return arg, "", nil
	}
	st, err := os.Stat(arg)
	if err != nil {
		return "", "", fmt.Errorf("reading the recipe: %w", err)
	}
	if st.Size() > recipe.MaxTextBytes {
		return "", "", fmt.Errorf("%s is %d bytes; a recipe is at most %d KiB", arg, st.Size(), recipe.MaxTextBytes>>10)
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return "", "", fmt.Errorf("reading the recipe: %w", err)
	}
	// The schema is checked here too, so a malformed file is reported
	// before termd is asked anything.
	if _, err := recipe.Parse(data); err != nil {
		var probs recipe.Problems
		if errors.As(err, &probs) {
			return "", "", fmt.Errorf("%s does not match the recipe schema (docs/RECIPES.md):\n  %s", arg, strings.Join(probs, "\n  "))
		}
		return "", "", err
	}
	return "", string(data), nil
}

// recipeDir is where a recipe runs: --dir, else the current directory.
func recipeDir(flag string) string {
	if flag != "" {
		if abs, err := filepath.Abs(flag); err == nil {
			return abs
		}
		return flag
	}
	if wd, err := os.Getwd(); err == nil {
		return wd
	}
	return ""
}
