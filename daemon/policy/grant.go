package policy

import (
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/termd/termd/internal/cmdline"
)

// A grant (a remembered approval, kept by the broker) stands in for an
// operator's approval of a decision that asks. This file holds what the
// policy says about it: the pattern of requests it may cover and what it is
// bound to. The request is still decided by the policy every time; a grant
// only turns a fresh "ask" into "allow", never a "deny".

// AnyOperand in a grant pattern marks an operand (or an option's value) that
// may vary: `git commit -m <any>`.
const AnyOperand = "<any>"

// Pattern is a grant's argv template: literal words and AnyOperand.
type Pattern []string

// anyMark stands for AnyOperand while a pattern is split (the command-line
// splitter refuses `<` and `>` as shell syntax).
const anyMark = "termd-grant-any-operand"

// ParsePattern reads an operator's pattern for the argv they approved. An
// empty text is argv itself (nothing varies). The program and its
// subcommand are fixed, options are fixed, and `<any>` may stand only for an
// operand or an option's value of the approved argv.
func (p *Policy) ParsePattern(text string, argv []string) (Pattern, error) {
	if strings.TrimSpace(text) == "" {
		return Pattern(slices.Clone(argv)), nil
	}
	words, err := cmdline.Split(strings.ReplaceAll(text, AnyOperand, anyMark))
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v (write the approved command with <any> for each operand that may vary)", text, err)
	}
	for i, w := range words {
		if w == anyMark {
			words[i] = AnyOperand
		} else if strings.Contains(w, anyMark) {
			return nil, fmt.Errorf("pattern %q: <any> must be a whole word", text)
		}
	}
	shown := cmdline.Quote(argv)
	if len(words) != len(argv) {
		return nil, fmt.Errorf("pattern %q has %d words but the approved command (%s) has %d: keep every word, with <any> for each operand that may vary", text, len(words), shown, len(argv))
	}
	if words[0] == AnyOperand {
		return nil, fmt.Errorf("pattern %q: the program is fixed (%s)", text, argv[0])
	}
	subSeen := false
	for i, w := range words {
		if w != AnyOperand {
			if w != argv[i] {
				return nil, fmt.Errorf("pattern %q: word %d is %q but the approved command has %q (%s)", text, i+1, w, argv[i], shown)
			}
			continue
		}
		a := argv[i]
		if strings.HasPrefix(a, "-") {
			return nil, fmt.Errorf("pattern %q: word %d (%s) is an option; options are fixed, <any> stands for an operand or an option's value", text, i+1, a)
		}
		if !subSeen && !optionValue(words, i) && p.isSubcommand(filepath.Base(argv[0]), a) {
			return nil, fmt.Errorf("pattern %q: word %d (%s) is the subcommand; it is fixed", text, i+1, a)
		}
		subSeen = subSeen || !optionValue(words, i)
	}
	return Pattern(words), nil
}

// optionValue reports whether position i follows an option word (its value).
func optionValue(words []string, i int) bool {
	return i > 1 && words[i-1] != AnyOperand && strings.HasPrefix(words[i-1], "-") && !strings.Contains(words[i-1], "=")
}

// isSubcommand reports whether a rule of program names word as a subcommand.
func (p *Policy) isSubcommand(program, word string) bool {
	for _, r := range p.byProg[program] {
		if r.subs[word] {
			return true
		}
	}
	return false
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
		if strings.HasPrefix(argv[i], "-") && !optionValue(pt, i) {
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
	ProgramPath   string            `json:"program_path"`
	ProgramSHA256 string            `json:"program_sha256"`
	PolicyVersion string            `json:"policy_version"`
	ProjectFiles  map[string]string `json:"project_files,omitempty"`
	Sandbox       SandboxProfile    `json:"sandbox"`
	Rules         []string          `json:"rules"`
	Risk          Risk              `json:"risk"`
	Mode          Mode              `json:"mode"`
	Env           map[string]string `json:"env,omitempty"`
	// Credentials the grant covers (names): a plan receiving any other
	// set is not covered.
	Credentials []string `json:"credentials,omitempty"`
}

// BindingOf is the binding of an approved decision.
func BindingOf(d Decision) GrantBinding {
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
func (g GrantBinding) Uncovered(d Decision) string {
	switch {
	case d.Verdict != Ask:
		return "the policy says " + string(d.Verdict)
	case d.PolicyVersion != g.PolicyVersion:
		return "the policy changed since the grant was made"
	case d.ResolvedPath != g.ProgramPath || d.BinarySHA256 != g.ProgramSHA256:
		return "the program is not the one granted (" + d.ResolvedPath + ")"
	case !maps.Equal(d.ProjectFiles, g.ProjectFiles):
		return "the entry files it runs changed since the grant was made"
	case !reflect.DeepEqual(normSandbox(d.Sandbox), normSandbox(g.Sandbox)):
		return "its sandbox profile differs from the granted one"
	case !slices.Equal(sortedCopy(d.Rules), sortedCopy(g.Rules)):
		return "other policy rules apply to it"
	case riskRank(d.Risk) > riskRank(g.Risk):
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

func normSandbox(s SandboxProfile) SandboxProfile {
	for _, l := range []*[]string{&s.Exec, &s.Read, &s.Write, &s.Cache} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return s
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
