// Package recipe is the recipe format shared by termd and its clients: the
// JSON Schema (served by the gateway, checked by `termctl recipe validate`),
// parsing of YAML or JSON recipe texts, and the checks that need no policy.
// Deciding and running steps is the daemon's (daemon/recipes).
package recipe

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/termd/termd/internal/schemacheck"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// SchemaJSON is the recipe JSON Schema (draft 2020-12), served by the gateway
// at /schemas/recipe-1.json.
//
//go:embed schema/recipe-1.json
var SchemaJSON []byte

// SchemaURL is the $id of SchemaJSON.
const SchemaURL = "https://termd.dev/schema/recipe-1.json"

// SchemaVersion is the format version this package reads.
const SchemaVersion = "1"

// MaxTextBytes bounds a recipe text.
const MaxTextBytes = 64 << 10

var (
	compileOnce sync.Once
	compiled    *schemacheck.Schema
	compileErr  error
)

// schema is the recipe schema, compiled on first use (termctl's start-up
// does not pay for it).
func schema() (*schemacheck.Schema, error) {
	compileOnce.Do(func() {
		compiled, compileErr = schemacheck.Compile(SchemaJSON)
		if compileErr != nil {
			compileErr = fmt.Errorf("recipe %w", compileErr)
		}
	})
	return compiled, compileErr
}

// file is the recipe as written; field names are the schema's.
type file struct {
	SchemaVersion string   `json:"schema_version"`
	Name          string   `json:"name"`
	Title         string   `json:"title"`
	Description   string   `json:"description"`
	Tags          []string `json:"tags"`
	Limits        struct {
		TimeoutSeconds uint32 `json:"timeout_seconds"`
		OutputBytes    int64  `json:"output_bytes"`
	} `json:"limits"`
	Steps []struct {
		Name           string   `json:"name"`
		Why            string   `json:"why"`
		Argv           []string `json:"argv"`
		Dir            string   `json:"dir"`
		OkExitCodes    []int32  `json:"ok_exit_codes"`
		Optional       bool     `json:"optional"`
		TimeoutSeconds uint32   `json:"timeout_seconds"`
	} `json:"steps"`
}

// Problems is every problem found in a recipe text, one line each.
type Problems []string

func (p Problems) Error() string { return strings.Join(p, "; ") }

// Parse reads a recipe text (YAML, or JSON, which is YAML too), checks it
// against the schema and the rules the schema cannot say, and returns it.
// A bad recipe returns Problems naming each place ("steps/2/argv: ...").
func Parse(text []byte) (*termdv1.Recipe, error) {
	if len(text) > MaxTextBytes {
		return nil, Problems{fmt.Sprintf("the recipe is %d bytes; at most %d KiB", len(text), MaxTextBytes>>10)}
	}
	if len(bytes.TrimSpace(text)) == 0 {
		return nil, Problems{"the recipe is empty: write schema_version, name, title, limits and steps (docs/RECIPES.md)"}
	}
	var doc any
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, Problems{"not YAML or JSON: " + err.Error()}
	}
	// YAML decodes into map[string]any with int values; the schema wants
	// JSON values, so round-trip through JSON.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, Problems{"not a recipe: " + err.Error()}
	}
	inst, err := schemacheck.Decode(raw)
	if err != nil {
		return nil, Problems{"not a recipe: " + err.Error()}
	}
	if _, ok := inst.(map[string]any); !ok {
		return nil, Problems{"not a recipe: the document must be one object with schema_version, name, title, limits and steps"}
	}
	sch, err := schema()
	if err != nil {
		return nil, err
	}
	if errs := sch.Validate(inst); len(errs) > 0 {
		return nil, schemaProblems(errs)
	}
	var f file
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, Problems{"not a recipe: " + err.Error()}
	}
	r := &termdv1.Recipe{
		SchemaVersion: f.SchemaVersion,
		Name:          f.Name,
		Title:         f.Title,
		Description:   strings.TrimSpace(f.Description),
		Tags:          f.Tags,
		Limits:        &termdv1.RecipeLimits{TimeoutSeconds: f.Limits.TimeoutSeconds, OutputBytes: f.Limits.OutputBytes},
	}
	var probs Problems
	for i, s := range f.Steps {
		if err := checkDir(s.Dir); err != nil {
			probs = append(probs, fmt.Sprintf("step %d (%s): dir %q: %v", i+1, s.Name, s.Dir, err))
		}
		r.Steps = append(r.Steps, &termdv1.RecipeStep{
			Name:           s.Name,
			Why:            strings.TrimSpace(s.Why),
			Argv:           s.Argv,
			Dir:            s.Dir,
			OkExitCodes:    s.OkExitCodes,
			Optional:       s.Optional,
			TimeoutSeconds: s.TimeoutSeconds,
		})
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return r, nil
}

// checkDir keeps a step inside the directory the recipe runs in (the policy
// still decides where that is allowed to be).
func checkDir(d string) error {
	if d == "" {
		return nil
	}
	if strings.HasPrefix(d, "/") {
		return errors.New("must be relative to the directory the recipe runs in")
	}
	for _, part := range strings.Split(d, "/") {
		if part == ".." {
			return errors.New("must not leave the directory the recipe runs in (no '..')")
		}
	}
	return nil
}

// StepDir is where a step runs: dir joined with the step's own dir.
func StepDir(dir string, s *termdv1.RecipeStep) string {
	if s.GetDir() == "" {
		return dir
	}
	if dir == "" {
		return path.Clean(s.GetDir())
	}
	return path.Join(dir, s.GetDir())
}

// OK says whether an exit code counts as success for a step.
func OK(s *termdv1.RecipeStep, exitCode int32) bool {
	codes := s.GetOkExitCodes()
	if len(codes) == 0 {
		return exitCode == 0
	}
	for _, c := range codes {
		if c == exitCode {
			return true
		}
	}
	return false
}

// schemaProblems turns schema errors into one line per failing place.
func schemaProblems(errs []*schemacheck.Error) Problems {
	var out Problems
	for _, e := range errs {
		where := strings.TrimPrefix(e.At, "/")
		if where == "" {
			where = "(top level)"
		}
		msg := where + ": " + e.Problem
		if strings.Contains(where, "argv") && (strings.Contains(msg, "got number") || strings.Contains(msg, "got boolean")) {
			// YAML reads -1, 15 or yes as numbers and booleans.
			msg += ` (quote it in YAML: "15", not 15)`
		}
		out = append(out, msg)
	}
	sort.Strings(out)
	return out
}
