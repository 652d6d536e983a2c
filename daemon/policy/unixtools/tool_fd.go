package unixtools

import (
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
)

var _ = toolspec.Family(registerFd)

// registerFd: fd (installed as fdfind on Debian and Ubuntu), a read-only
// file finder. -x/--exec and -X/--exec-batch run a program for the results
// (hidden execution): refused, as find -exec is. -l/--list-details runs ls
// for them; the grammar leaves it out, so it is decided as unknown code. The
// first operand is the pattern (a regex, or a glob with -g), the others
// and --search-path are directories read recursively, relative to
// --base-directory when it is given.
func registerFd() {
	R := grammar.KPathRead
	toolspec.Register("fd|fdfind", &toolspec.ToolSpec{NamesOnly: true, Chdir: "--base-directory", Grammar: &grammar.CmdSpec{Operand: R, Post: postFd, Opts: grammar.Opts(
		grammar.Flags("-H|--hidden --no-hidden -I|--no-ignore --ignore --no-ignore-vcs --ignore-vcs --no-require-git --require-git --no-ignore-parent -u|--unrestricted -s|--case-sensitive -i|--ignore-case -g|--glob --regex -F|--fixed-strings -a|--absolute-path --relative-path -L|--follow --no-follow -p|--full-path -0|--print0 --prune -1 -q|--quiet --show-errors --one-file-system|--mount|--xdev -h|--help -V|--version"),
		grammar.List(grammar.O("-d|--max-depth|--maxdepth="), grammar.O("--min-depth="), grammar.O("--exact-depth="), grammar.O("-E|--exclude=", grammar.KPattern), grammar.O("-t|--type="), grammar.O("-e|--extension="), grammar.O("-S|--size="),
			grammar.O("--changed-within|--change-newer-than|--newer="), grammar.O("--changed-before|--change-older-than|--older="), grammar.O("-o|--owner="), grammar.O("--format="), grammar.O("-c|--color="), grammar.O("--hyperlink?"),
			grammar.O("-j|--threads="), grammar.O("--max-buffer-time="), grammar.O("--max-results="), grammar.O("--path-separator="), grammar.O("--strip-cwd-prefix?"), grammar.O("--and=", grammar.KPattern),
			grammar.O("--base-directory=", R).MovesDir(), grammar.O("--search-path=", R), grammar.O("--ignore-file=", R),
			grammar.O("-x|--exec=").DenyWith(toolspec.WhyExec+": fd runs it for every result; send the command itself, or fd and then the command"),
			grammar.O("-X|--exec-batch=").DenyWith(toolspec.WhyExec+": fd runs it with the results as arguments; send the command itself, or fd and then the command"),
			grammar.O("--batch-size=")))}})
}

// postFd: the first operand is the pattern; every directory is searched
// recursively (names only: namesOnly).
func postFd(p *grammar.Parsed) {
	p.Recursive = true
	if len(p.Operands) > 0 {
		p.Operands[0].Kind = grammar.KPattern
	}
}
