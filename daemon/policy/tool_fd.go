package policy

var _ = family(registerFd)

// registerFd: fd (installed as fdfind on Debian and Ubuntu), a read-only
// file finder. -x/--exec and -X/--exec-batch run a program for the results
// (hidden execution): refused, as find -exec is. -l/--list-details runs ls
// for them; the grammar leaves it out, so it is decided as unknown code. The
// first operand is the pattern (a regex, or a glob with -g), the others
// and --search-path are directories read recursively, relative to
// --base-directory when it is given.
func registerFd() {
	R := KPathRead
	register("fd|fdfind", &toolSpec{namesOnly: true, chdir: "--base-directory", grammar: &cmdSpec{operand: R, post: postFd, opts: opts(
		flags("-H|--hidden --no-hidden -I|--no-ignore --ignore --no-ignore-vcs --ignore-vcs --no-require-git --require-git --no-ignore-parent -u|--unrestricted -s|--case-sensitive -i|--ignore-case -g|--glob --regex -F|--fixed-strings -a|--absolute-path --relative-path -L|--follow --no-follow -p|--full-path -0|--print0 --prune -1 -q|--quiet --show-errors --one-file-system|--mount|--xdev -h|--help -V|--version"),
		list(o("-d|--max-depth|--maxdepth="), o("--min-depth="), o("--exact-depth="), o("-E|--exclude=", KPattern), o("-t|--type="), o("-e|--extension="), o("-S|--size="),
			o("--changed-within|--change-newer-than|--newer="), o("--changed-before|--change-older-than|--older="), o("-o|--owner="), o("--format="), o("-c|--color="), o("--hyperlink?"),
			o("-j|--threads="), o("--max-buffer-time="), o("--max-results="), o("--path-separator="), o("--strip-cwd-prefix?"), o("--and=", KPattern),
			o("--base-directory=", R).movesDir(), o("--search-path=", R), o("--ignore-file=", R),
			o("-x|--exec=").denyWith(whyExec+": fd runs it for every result; send the command itself, or fd and then the command"),
			o("-X|--exec-batch=").denyWith(whyExec+": fd runs it with the results as arguments; send the command itself, or fd and then the command"),
			o("--batch-size=")))}})
}

// postFd: the first operand is the pattern; every directory is searched
// recursively (names only: namesOnly).
func postFd(p *parsed) {
	p.recursive = true
	if len(p.operands) > 0 {
		p.operands[0].kind = KPattern
	}
}
