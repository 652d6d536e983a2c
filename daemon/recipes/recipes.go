// Package recipes owns termd's recipes: the built-in catalog, the operator's
// recipe directory, validation of each step by the live policy, and runs.
// A recipe never holds privilege of its own: every step is an ordinary plan
// of the caller, decided in inspect mode, and only steps the policy allows
// outright, read-only, may run. The format lives in the shared package
// recipe/ (schema and parsing); this package decides and runs.
package recipes

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
	"github.com/termd/termd/recipe"
)

// Broker is what a recipe needs from the broker: the same calls a client makes.
type Broker interface {
	CheckPolicy(ctx context.Context, caller *termdv1.Principal, r *termdv1.CommandRequest) (*termdv1.Decision, string, error)
	CreateSession(ctx context.Context, caller *termdv1.Principal, label string) (*termdv1.Session, error)
	CreatePlan(ctx context.Context, caller *termdv1.Principal, sessionID string, r *termdv1.CommandRequest) (*termdv1.Plan, error)
	ExecuteAndWait(ctx context.Context, caller *termdv1.Principal, planID, sessionID string, detach bool, send func([]*termdv1.Event) error) error
	GetReceipt(ctx context.Context, caller *termdv1.Principal, id, sessionID string) (*receipt.Receipt, error)
}

//go:embed catalog/*.yaml
var catalogFS embed.FS

// BuiltIn is the source of catalog recipes.
const BuiltIn = "built-in"

// maxOperatorFiles bounds how many files the operator directory is read for.
const maxOperatorFiles = 256

// Service lists, validates and runs recipes.
type Service struct {
	b Broker
	// dir returns the operator's recipe directory (live config; empty: none).
	dir func() string
	now func() time.Time
}

// New builds the service; dir is read on every call, so a config reload
// (or a new file in the directory) applies at once.
func New(b Broker, dir func() string) *Service {
	return &Service{b: b, dir: dir, now: time.Now}
}

type entry struct {
	r    *termdv1.Recipe
	text []byte
	err  string
	file string
}

var (
	catalogOnce sync.Once
	catalog     []entry
)

// builtIns parses the embedded catalog once; a test keeps it valid.
func builtIns() []entry {
	catalogOnce.Do(func() {
		names, _ := fs.Glob(catalogFS, "catalog/*.yaml")
		for _, n := range names {
			text, _ := catalogFS.ReadFile(n)
			catalog = append(catalog, parseEntry(text, BuiltIn, n))
		}
	})
	return catalog
}

func parseEntry(text []byte, source, file string) entry {
	r, err := recipe.Parse(text)
	if err != nil {
		name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		return entry{r: &termdv1.Recipe{Name: name, Source: source}, err: err.Error(), file: file}
	}
	r.Source = source
	return entry{r: r, text: text, file: file}
}

// all is the catalog with the operator's recipes over it: an operator recipe
// with a built-in's name replaces it.
func (s *Service) all() ([]entry, string) {
	byName := map[string]int{}
	var out []entry
	for _, e := range builtIns() {
		byName[e.r.Name] = len(out)
		out = append(out, e)
	}
	dir := s.dir()
	if dir == "" {
		return out, ""
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		out = append(out, entry{r: &termdv1.Recipe{Name: "(operator directory)", Source: dir}, err: fmt.Sprintf("reading the operator recipe directory: %v", err)})
		return out, dir
	}
	seen := map[string]string{}
	n := 0
	for _, f := range files {
		ext := filepath.Ext(f.Name())
		if f.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		if n++; n > maxOperatorFiles {
			out = append(out, entry{r: &termdv1.Recipe{Name: "(operator directory)", Source: dir}, err: fmt.Sprintf("more than %d recipe files; the rest are not read", maxOperatorFiles)})
			break
		}
		p := filepath.Join(dir, f.Name())
		e := readOperatorFile(p)
		if prev, dup := seen[e.r.Name]; dup && e.err == "" {
			e = entry{r: &termdv1.Recipe{Name: e.r.Name, Source: p}, err: fmt.Sprintf("recipe %q is already defined in %s; rename one", e.r.Name, prev), file: p}
		} else if e.err == "" {
			seen[e.r.Name] = p
		}
		if i, ok := byName[e.r.Name]; ok && e.err == "" {
			out[i] = e
			continue
		}
		out = append(out, e)
	}
	return out, dir
}

func readOperatorFile(p string) entry {
	f, err := os.Open(p)
	if err != nil {
		return entry{r: &termdv1.Recipe{Name: filepath.Base(p), Source: p}, err: err.Error(), file: p}
	}
	defer f.Close()
	// One byte more than the limit, so Parse reports an oversized file.
	text, err := io.ReadAll(io.LimitReader(f, recipe.MaxTextBytes+1))
	if err != nil {
		return entry{r: &termdv1.Recipe{Name: filepath.Base(p), Source: p}, err: err.Error(), file: p}
	}
	return parseEntry(text, p, p)
}

// List returns every recipe, sorted by name; broken operator files are
// listed with their error.
func (s *Service) List() *termdv1.ListRecipesResponse {
	all, dir := s.all()
	sort.SliceStable(all, func(i, j int) bool { return all[i].r.Name < all[j].r.Name })
	resp := &termdv1.ListRecipesResponse{OperatorDir: dir}
	for _, e := range all {
		resp.Recipes = append(resp.Recipes, &termdv1.RecipeEntry{Recipe: e.r, Error: e.err})
	}
	return resp
}

// lookup finds a recipe by name.
func (s *Service) lookup(name string) (entry, error) {
	all, _ := s.all()
	var names []string
	for _, e := range all {
		if e.r.Name == name {
			if e.err != "" {
				return e, errdefs.Precondition("recipe %s (%s) is broken: %s", name, e.r.Source, e.err)
			}
			return e, nil
		}
		if e.err == "" {
			names = append(names, e.r.Name)
		}
	}
	sort.Strings(names)
	return entry{}, errdefs.NotFound("no recipe named %q; recipes: %s (`termctl recipe list`)", name, strings.Join(names, ", "))
}

// Get returns one recipe and its text.
func (s *Service) Get(name string) (*termdv1.GetRecipeResponse, error) {
	if name == "" {
		return nil, errdefs.Invalid("name a recipe (`termctl recipe list` shows them)")
	}
	e, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	return &termdv1.GetRecipeResponse{Recipe: e.r, Text: string(e.text)}, nil
}

// resolve turns a request's name or text into a recipe; a text that does
// not parse returns its problems.
func (s *Service) resolve(name, text string) (*termdv1.Recipe, recipe.Problems, error) {
	switch {
	case name != "" && text != "":
		return nil, nil, errdefs.Invalid("send either a recipe name or a recipe text, not both")
	case name != "":
		e, err := s.lookup(name)
		if err != nil {
			return nil, nil, err
		}
		return e.r, nil, nil
	case strings.TrimSpace(text) != "":
		r, err := recipe.Parse([]byte(text))
		var probs recipe.Problems
		if errors.As(err, &probs) {
			return nil, probs, nil
		}
		if err != nil {
			return nil, nil, errdefs.Internal("%v", err)
		}
		r.Source = "request"
		return r, nil, nil
	}
	return nil, nil, errdefs.Invalid("nothing to check: send a recipe name (`termctl recipe list`) or a recipe text")
}

// stepRequest is the command request of one step: always inspect mode.
func stepRequest(st *termdv1.RecipeStep, dir string, timeout uint32) *termdv1.CommandRequest {
	return &termdv1.CommandRequest{
		Argv:           st.Argv,
		Cwd:            recipe.StepDir(dir, st),
		Mode:           termdv1.Mode_MODE_INSPECT,
		TimeoutSeconds: timeout,
		Sandbox:        "read-only",
	}
}

// stepTimeout is a step's own bound: its timeout_seconds, at most the recipe's.
func stepTimeout(r *termdv1.Recipe, st *termdv1.RecipeStep) uint32 {
	t := r.GetLimits().GetTimeoutSeconds()
	if st.TimeoutSeconds > 0 && st.TimeoutSeconds < t {
		t = st.TimeoutSeconds
	}
	return t
}

// stepProblem says why the live policy's decision keeps a step from running
// in a recipe; empty when it may run.
func stepProblem(i int, st *termdv1.RecipeStep, d *termdv1.Decision) string {
	reasons := strings.Join(d.GetReasons(), "; ")
	switch {
	case len(d.GetWrites()) > 0:
		return fmt.Sprintf("step %d (%q) writes %s: recipes are inspect-only; remove the step, or run it on its own with `termctl run`", i, st.Name, strings.Join(d.GetWrites(), ", "))
	case d.GetVerdict() == termdv1.Verdict_VERDICT_DENY:
		return fmt.Sprintf("step %d is blocked: %s", i, reasons)
	case d.GetVerdict() == termdv1.Verdict_VERDICT_ASK:
		return fmt.Sprintf("step %d unexpectedly requires approval: %s", i, reasons)
	case d.GetVerdict() != termdv1.Verdict_VERDICT_ALLOW:
		return fmt.Sprintf("step %d: the policy answered %v", i, d.GetVerdict())
	case !d.GetReadOnly():
		return fmt.Sprintf("step %d (%q) is not read-only (%s): recipes are inspect-only", i, st.Name, reasons)
	}
	return ""
}

// check decides every step with the live policy, creating nothing.
func (s *Service) check(ctx context.Context, caller *termdv1.Principal, r *termdv1.Recipe, dir string) ([]*termdv1.StepCheck, []string) {
	var checks []*termdv1.StepCheck
	var probs []string
	for i, st := range r.Steps {
		c := &termdv1.StepCheck{Index: uint32(i + 1), Name: st.Name, Argv: st.Argv}
		d, _, err := s.b.CheckPolicy(ctx, caller, stepRequest(st, dir, stepTimeout(r, st)))
		if err != nil {
			c.Problem = fmt.Sprintf("step %d (%q): %v", i+1, st.Name, err)
		} else {
			c.Cwd, c.Verdict, c.Reasons, c.ReadOnly, c.Writes, c.RequestHash = d.Cwd, d.Verdict, d.Reasons, d.ReadOnly, d.Writes, d.RequestHash
			c.Problem = stepProblem(i+1, st, d)
		}
		if c.Problem != "" {
			probs = append(probs, c.Problem)
		}
		checks = append(checks, c)
	}
	return checks, probs
}

// Validate checks a recipe's form and decides each step with the live policy.
func (s *Service) Validate(ctx context.Context, caller *termdv1.Principal, req *termdv1.ValidateRecipeRequest) (*termdv1.ValidateRecipeResponse, error) {
	r, probs, err := s.resolve(req.Name, req.Text)
	if err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		return &termdv1.ValidateRecipeResponse{Problems: probs}, nil
	}
	checks, stepProbs := s.check(ctx, caller, r, req.Dir)
	return &termdv1.ValidateRecipeResponse{Valid: len(stepProbs) == 0, Problems: stepProbs, Recipe: r, Steps: checks}, nil
}
