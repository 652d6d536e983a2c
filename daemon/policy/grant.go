package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/termd/termd/daemon/policy/grant"
	"github.com/termd/termd/internal/cmdline"
)

// ParsePattern reads an operator's pattern for the argv they approved. An
// empty text is argv itself (nothing varies). The program and its
// subcommand are fixed, options are fixed, and `<any>` may stand only for an
// operand or an option's value of the approved argv.
func (p *Policy) ParsePattern(text string, argv []string) (grant.Pattern, error) {
	if strings.TrimSpace(text) == "" {
		return grant.Pattern(slices.Clone(argv)), nil
	}
	words, err := cmdline.Split(strings.ReplaceAll(text, grant.AnyOperand, grant.AnyMark))
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v (write the approved command with <any> for each operand that may vary)", text, err)
	}
	for i, w := range words {
		if w == grant.AnyMark {
			words[i] = grant.AnyOperand
		} else if strings.Contains(w, grant.AnyMark) {
			return nil, fmt.Errorf("pattern %q: <any> must be a whole word", text)
		}
	}
	shown := cmdline.Quote(argv)
	if len(words) != len(argv) {
		return nil, fmt.Errorf("pattern %q has %d words but the approved command (%s) has %d: keep every word, with <any> for each operand that may vary", text, len(words), shown, len(argv))
	}
	if words[0] == grant.AnyOperand {
		return nil, fmt.Errorf("pattern %q: the program is fixed (%s)", text, argv[0])
	}
	subSeen := false
	for i, w := range words {
		if w != grant.AnyOperand {
			if w != argv[i] {
				return nil, fmt.Errorf("pattern %q: word %d is %q but the approved command has %q (%s)", text, i+1, w, argv[i], shown)
			}
			continue
		}
		a := argv[i]
		if strings.HasPrefix(a, "-") {
			return nil, fmt.Errorf("pattern %q: word %d (%s) is an option; options are fixed, <any> stands for an operand or an option's value", text, i+1, a)
		}
		if !subSeen && !grant.OptionValue(words, i) && p.isSubcommand(filepath.Base(argv[0]), a) {
			return nil, fmt.Errorf("pattern %q: word %d (%s) is the subcommand; it is fixed", text, i+1, a)
		}
		subSeen = subSeen || !grant.OptionValue(words, i)
	}
	return grant.Pattern(words), nil
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
