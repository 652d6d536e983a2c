// Package grant is what the policy says about a grant (a remembered
// approval, kept by the broker), which stands in for an operator's approval
// of a decision that asks: the pattern of requests it may cover and what it
// is bound to. The request is still decided by the policy every time; a
// grant only turns a fresh "ask" into "allow", never a "deny". It imports
// decision and verdict; parsing a pattern against a tool's grammar is the
// engine's (Policy.ParsePattern).
package grant

import (
	"maps"
	"slices"
	"strings"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/cmdline"
)

// AnyOperand in a grant pattern marks an operand (or an option's value) that
// may vary: `git commit -m <any>`.
const AnyOperand = "<any>"

// Pattern is a grant's argv template: literal words and AnyOperand.
type Pattern []string

// AnyMark stands for AnyOperand while a pattern is split (the command-line
// splitter refuses `<` and `>` as shell syntax).
const AnyMark = "termd-grant-any-operand"

// OptionValue reports whether position i follows an option word (its value).
func OptionValue(words []string, i int) bool {
	return i > 1 && words[i-1] != AnyOperand && strings.HasPrefix(words[i-1], "-") && !strings.Contains(words[i-1], "=")
}

// Matches reports whether argv fits the pattern: same length, the same
// literal words, and an operand where the pattern has <any> (a word that
// starts with "-" fits only as the value of the option before it, so
// `git commit -m <any>` never covers `git commit --amend`).
func (pt Pattern) Matches(argv []string) bool {
	if len(pt) != len(argv) || len(pt) == 0 {
		return false
	}
	for i, w := range pt {
		if w != AnyOperand {
			if w != argv[i] {
				return false
			}
			continue
		}
		if strings.HasPrefix(argv[i], "-") && !OptionValue(pt, i) {
			return false
		}
	}
	return true
}

// String is the pattern as the operator writes it.
func (pt Pattern) String() string {
	out := make([]string, len(pt))
	for i, w := range pt {
		if w == AnyOperand {
			out[i] = AnyOperand
		} else {
			out[i] = cmdline.Quote([]string{w})
		}
	}
	return strings.Join(out, " ")
}

// GrantBinding is what a grant is bound to besides its pattern: the
// program's identity, the policy version, the entry files, the sandbox
// profile, the rules and risk, the mode and the added environment. A fresh
// decision outside it is not covered.
type GrantBinding struct {
	ProgramPath   string                  `json:"program_path"`
	ProgramSHA256 string                  `json:"program_sha256"`
	PolicyVersion string                  `json:"policy_version"`
	ProjectFiles  map[string]string       `json:"project_files,omitempty"`
	Sandbox       decision.SandboxProfile `json:"sandbox"`
	Rules         []string                `json:"rules"`
	Risk          verdict.Risk            `json:"risk"`
	Mode          verdict.Mode            `json:"mode"`
	Env           map[string]string       `json:"env,omitempty"`
	// Credentials the grant covers (names): a plan receiving any other
	// set is not covered.
	Credentials []string `json:"credentials,omitempty"`
}

// BindingOf is the binding of an approved decision.
func BindingOf(d decision.Decision) GrantBinding {
	return GrantBinding{
		ProgramPath:   d.ResolvedPath,
		ProgramSHA256: d.BinarySHA256,
		PolicyVersion: d.PolicyVersion,
		ProjectFiles:  maps.Clone(d.ProjectFiles),
		Sandbox:       d.Sandbox,
		Rules:         slices.Clone(d.Rules),
		Risk:          d.Risk,
		Mode:          d.Mode,
		Env:           maps.Clone(d.Env),
		Credentials:   slices.Clone(d.Credentials),
	}
}

// Uncovered says why a fresh decision is outside the binding, or "" when
// the grant may stand in for its approval. Only a decision that asks can be
// covered: a grant never widens a deny.
func (g GrantBinding) Uncovered(d decision.Decision) string {
	switch {
	case d.Verdict != verdict.Ask:
		return "the policy says " + string(d.Verdict)
	case d.PolicyVersion != g.PolicyVersion:
		return "the policy changed since the grant was made"
	case d.ResolvedPath != g.ProgramPath || d.BinarySHA256 != g.ProgramSHA256:
		return "the program is not the one granted (" + d.ResolvedPath + ")"
	case !maps.Equal(d.ProjectFiles, g.ProjectFiles):
		return "the entry files it runs changed since the grant was made"
	case !d.Sandbox.Equal(g.Sandbox):
		return "its sandbox profile differs from the granted one"
	case !slices.Equal(sortedCopy(d.Rules), sortedCopy(g.Rules)):
		return "other policy rules apply to it"
	case verdict.RiskRank(d.Risk) > verdict.RiskRank(g.Risk):
		return "its risk (" + string(d.Risk) + ") is above the granted " + string(g.Risk)
	case d.Mode != g.Mode:
		return "it runs in another mode"
	case !maps.Equal(d.Env, g.Env):
		return "its environment differs"
	case !slices.Equal(d.Credentials, g.Credentials):
		return "it receives other credentials than the grant names (" + strings.Join(d.Credentials, ", ") + ")"
	}
	return ""
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
