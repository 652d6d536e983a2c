package mcpbridge

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// RecipeListInput takes nothing.
type RecipeListInput struct{}

// RecipeRunInput names a recipe and where to run it.
type RecipeRunInput struct {
	Name string `json:"name" jsonschema:"the recipe, from terminal_recipes (e.g. inspect-repository, discover-go-tests)"`
	Dir  string `json:"dir,omitempty" jsonschema:"directory the steps run in: an absolute path inside a workspace, or relative to the (first) workspace root; default: the workspace root"`
}

// RecipeView is one recipe of the catalog.
type RecipeView struct {
	Name        string   `json:"name"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Steps       []string `json:"steps,omitempty" jsonschema:"each step's command"`
	Error       string   `json:"error,omitempty" jsonschema:"why the recipe cannot run (a broken operator file)"`
}

// RecipeListView is terminal_recipes' answer.
type RecipeListView struct {
	Recipes []RecipeView `json:"recipes"`
}

// RecipeStepView is what one step of a run did.
type RecipeStepView struct {
	Index     uint32 `json:"index"`
	Name      string `json:"name"`
	Command   string `json:"command"`
	Status    string `json:"status" jsonschema:"the receipt's status: succeeded, failed, timed_out, ..."`
	ExitCode  int32  `json:"exit_code"`
	OK        bool   `json:"ok" jsonschema:"the exit code counts as success for this step (grep's 1, no match, may)"`
	ReceiptID string `json:"receipt_id,omitempty" jsonschema:"the signed receipt (terminal_receipt)"`
	PlanID    string `json:"plan_id,omitempty"`
	Stdout    string `json:"stdout,omitempty"`
	Stderr    string `json:"stderr,omitempty"`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"output was cut by the recipe's output budget or the receipt's cap"`
}

// RecipeRunView is terminal_recipe_run's answer.
type RecipeRunView struct {
	Recipe     string           `json:"recipe"`
	Status     string           `json:"status" jsonschema:"succeeded or failed"`
	SessionID  string           `json:"session_id"`
	Problems   []string         `json:"problems,omitempty"`
	ReceiptIDs []string         `json:"receipt_ids"`
	Steps      []RecipeStepView `json:"steps"`
}

func (b *Bridge) addRecipeTools() {
	addTool(b.server, &mcp.Tool{
		Name:        "terminal_recipes",
		Title:       "List recipes",
		Description: "List termd's recipes: named, inspect-only sequences of read-only commands (repository state, test discovery for Go/JS/Python, log triage, port configuration), with their steps.",
		Annotations: &mcp.ToolAnnotations{Title: "List recipes", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.recipes)
	addTool(b.server, &mcp.Tool{
		Name:        "terminal_recipe_run",
		Title:       "Run a recipe",
		Description: "Run a named recipe in a directory. termd decides every step with its live policy in inspect mode first: a recipe with a step that would write, need approval or be denied runs nothing and the error says which step. Each step runs as your plan and returns its output and signed receipt id. Recipes are bounded by their own time limit (at most 5 minutes; most take seconds).",
		Annotations: &mcp.ToolAnnotations{Title: "Run a recipe", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, b.recipeRun)
}

func (b *Bridge) recipes(ctx context.Context, _ *mcp.CallToolRequest, _ RecipeListInput) (*mcp.CallToolResult, *RecipeListView, error) {
	resp, err := b.c.Recipes.ListRecipes(ctx, &termdv1.ListRecipesRequest{})
	if err != nil {
		return nil, nil, failure(err, "")
	}
	v := &RecipeListView{Recipes: []RecipeView{}}
	var names []string
	for _, e := range resp.Recipes {
		r := e.GetRecipe()
		rv := RecipeView{Name: r.GetName(), Title: r.GetTitle(), Description: r.GetDescription(), Tags: r.GetTags(), Error: e.GetError()}
		for _, s := range r.GetSteps() {
			rv.Steps = append(rv.Steps, cmdline.Quote(s.Argv))
		}
		v.Recipes = append(v.Recipes, rv)
		names = append(names, rv.Name)
	}
	return reply(v, false, fmt.Sprintf("%d recipes: %s. Next: terminal_recipe_run with a name", len(names), strings.Join(names, ", ")))
}

func (b *Bridge) recipeRun(ctx context.Context, _ *mcp.CallToolRequest, in RecipeRunInput) (*mcp.CallToolResult, *RecipeRunView, error) {
	if in.Name == "" {
		return nil, nil, fmt.Errorf("name a recipe (terminal_recipes lists them)")
	}
	resp, err := b.c.Recipes.RunRecipe(ctx, &termdv1.RunRecipeRequest{Name: in.Name, Dir: in.Dir})
	if err != nil {
		return nil, nil, failure(err, "a recipe runs only steps the policy allows read-only; run a refused step on its own with terminal_plan, or pick another recipe")
	}
	v := &RecipeRunView{Recipe: resp.Recipe, Status: resp.Status, SessionID: resp.SessionId, Problems: resp.Problems, ReceiptIDs: []string{}, Steps: []RecipeStepView{}}
	for _, s := range resp.Steps {
		v.Steps = append(v.Steps, RecipeStepView{Index: s.Index, Name: s.Name, Command: cmdline.Quote(s.Argv), Status: s.Status, ExitCode: s.ExitCode,
			OK: s.Ok, ReceiptID: s.ReceiptId, PlanID: s.PlanId, Stdout: s.Stdout, Stderr: s.Stderr, Truncated: s.Truncated})
		if s.ReceiptId != "" {
			v.ReceiptIDs = append(v.ReceiptIDs, s.ReceiptId)
		}
	}
	summary := fmt.Sprintf("recipe %s %s: %d steps, receipts %s", v.Recipe, v.Status, len(v.Steps), strings.Join(v.ReceiptIDs, ", "))
	if len(v.Problems) > 0 {
		summary += "; " + strings.Join(v.Problems, "; ")
	}
	return reply(v, v.Status != "succeeded", summary)
}
