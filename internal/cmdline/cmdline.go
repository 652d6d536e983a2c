// Package cmdline splits a command string into argv with POSIX quoting and
// no shell (Split), and renders argv back as one line (Quote). The policy
// engine, the daemon and the clients share it; it is a leaf.
package cmdline

import (
	"errors"
	"strings"
)

// ErrShellSyntax is wrapped by Split errors about shell syntax.
var ErrShellSyntax = errors.New("shell syntax is not accepted in a command string (termd runs no shell); send one program and its arguments, as argv")

// operatorHint says what to do instead of each shell operator.
var operatorHint = map[byte]string{
	'|': "no pipes: plan each program on its own, or use the program's own options",
	'&': "no && or background jobs: plan each command on its own",
	';': "one command per plan",
	'<': "no redirections: pass the file name as an argument",
	'>': "no redirections: the output is captured for you; programs write files through their own options, e.g. sort -o FILE",
	'(': "no subshells",
	')': "no subshells",
}

// MaxCommandBytes bounds a command string.
const MaxCommandBytes = 1 << 20

// Split splits a command string into words with POSIX quoting
// rules and no expansion of any kind. Shell syntax (| & ; < > $ ` ( ),
// newline, comments) is refused: send argv instead.
func Split(s string) ([]string, error) {
	if len(s) > MaxCommandBytes {
		return nil, errors.New("command string too large")
	}
	var words []string
	var cur strings.Builder
	inWord := false
	refuse := func(what string) error {
		return errors.New(what + ": " + ErrShellSyntax.Error())
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\n', '\r':
			return nil, refuse("newline separates commands")
		case '|', '&', ';', '<', '>', '(', ')':
			return nil, refuse("'" + string(c) + "' is a shell operator (" + operatorHint[c] + ")")
		case '$':
			return nil, refuse("'$' is an expansion")
		case '`':
			return nil, refuse("'`' is command substitution")
		case '#':
			if !inWord {
				return nil, refuse("'#' starts a comment")
			}
			cur.WriteByte(c)
		case '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			if s[i+1] == '\n' {
				return nil, refuse("line continuation")
			}
			cur.WriteByte(s[i+1])
			i++
			inWord = true
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case '"':
			i++
			closed := false
			for ; i < len(s); i++ {
				d := s[i]
				if d == '"' {
					closed = true
					break
				}
				if d == '$' {
					return nil, refuse("'$' inside double quotes is an expansion")
				}
				if d == '`' {
					return nil, refuse("'`' inside double quotes is command substitution")
				}
				if d == '\\' && i+1 < len(s) {
					switch s[i+1] {
					case '"', '\\', '$', '`':
						cur.WriteByte(s[i+1])
						i++
						continue
					case '\n':
						return nil, refuse("line continuation")
					}
				}
				cur.WriteByte(d)
			}
			if !closed {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty command")
	}
	return words, nil
}

// Quote renders argv as one command line that Split splits back into the
// same words (arguments outside a safe set are single-quoted).
func Quote(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		safe := a != ""
		for _, r := range a {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
				safe = false
				break
			}
		}
		if safe {
			b.WriteString(a)
		} else {
			b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
		}
	}
	return b.String()
}
