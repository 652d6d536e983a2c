package unixtools

import (
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
)

var _ = toolspec.Family(registerRg)

// registerRg: ripgrep, a read-only search. It runs other programs only
// when told to: --pre (a preprocessor for every file) and --hostname-bin
// are refused; -z runs the decompressors found in PATH, which a read-only
// sandbox does not let it execute. The first operand is the pattern unless
// -e, -f, --files or --type-list say otherwise; the rest are read
// recursively.
func registerRg() {
	R := grammar.KPathRead
	// rg reads options from RIPGREP_CONFIG_PATH unless told not to.
	toolspec.Register("rg", &toolspec.ToolSpec{ExecArgs: [][]string{{"--no-config"}}, Grammar: &grammar.CmdSpec{Operand: R, Post: postRg, Opts: grammar.Opts(grammar.Flags("-i|--ignore-case -S|--smart-case -s|--case-sensitive -w|--word-regexp -x|--line-regexp -v|--invert-match -F|--fixed-strings -c|--count --count-matches -l|--files-with-matches --files-without-match --files -n|--line-number -N|--no-line-number -H|--with-filename -I|--no-filename -o|--only-matching -q|--quiet --type-list -u|--unrestricted --hidden --no-hidden --no-ignore --no-ignore-vcs --no-ignore-parent --no-ignore-dot --no-ignore-global --no-ignore-exclude --no-ignore-files -L|--follow --json --vimgrep --column --no-heading --heading -p|--pretty --max-columns-preview -U|--multiline --multiline-dotall -P|--pcre2 -z|--search-zip -a|--text --binary --trim -0|--null --null-data --stats --debug --trace --no-messages --no-config --crlf --passthru --line-buffered --block-buffered -b|--byte-offset --one-file-system --no-unicode --include-zero --mmap --no-mmap -h|--help -V|--version --sort-files --glob-case-insensitive --ignore-file-case-insensitive"),
		grammar.List(grammar.O("-e|--regexp=", grammar.KPattern), grammar.O("-f|--file=", R), grammar.O("-r|--replace="), grammar.O("-g|--glob=", grammar.KPattern), grammar.O("--iglob=", grammar.KPattern), grammar.O("-t|--type="), grammar.O("-T|--type-not="), grammar.O("--type-add="), grammar.O("--type-clear="), grammar.O("--ignore-file=", R), grammar.O("-d|--max-depth|--maxdepth="), grammar.O("-m|--max-count="), grammar.O("-A|--after-context="), grammar.O("-B|--before-context="), grammar.O("-C|--context="), grammar.O("--context-separator="), grammar.O("--color="), grammar.O("--colors="), grammar.O("--sort="), grammar.O("--sortr="), grammar.O("-j|--threads="), grammar.O("-M|--max-columns="), grammar.O("--max-filesize="), grammar.O("--engine="), grammar.O("-E|--encoding="), grammar.O("--field-match-separator="), grammar.O("--field-context-separator="), grammar.O("--path-separator="), grammar.O("--hyperlink-format="), grammar.O("--generate="), grammar.O("--pre-glob=", grammar.KPattern),
			grammar.O("--pre=").DenyWith("runs a preprocessor program on every file"), grammar.O("--hostname-bin=").DenyWith("runs a program to get the host name")))}})
}

func postRg(p *grammar.Parsed) {
	p.Recursive = true
	if p.Has("--files", "--type-list", "-e", "-f") {
		return
	}
	if len(p.Operands) > 0 {
		p.Operands[0].Kind = grammar.KPattern
	}
}
