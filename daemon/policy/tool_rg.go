package policy

var _ = family(registerRg)

// registerRg: ripgrep, a read-only search. It runs other programs only
// when told to: --pre (a preprocessor for every file) and --hostname-bin
// are refused; -z runs the decompressors found in PATH, which a read-only
// sandbox does not let it execute. The first operand is the pattern unless
// -e, -f, --files or --type-list say otherwise; the rest are read
// recursively.
func registerRg() {
	R := KPathRead
	// rg reads options from RIPGREP_CONFIG_PATH unless told not to.
	register("rg", &toolSpec{execArgs: [][]string{{"--no-config"}}, grammar: &cmdSpec{operand: R, post: postRg, opts: opts(flags("-i|--ignore-case -S|--smart-case -s|--case-sensitive -w|--word-regexp -x|--line-regexp -v|--invert-match -F|--fixed-strings -c|--count --count-matches -l|--files-with-matches --files-without-match --files -n|--line-number -N|--no-line-number -H|--with-filename -I|--no-filename -o|--only-matching -q|--quiet --type-list -u|--unrestricted --hidden --no-hidden --no-ignore --no-ignore-vcs --no-ignore-parent --no-ignore-dot --no-ignore-global --no-ignore-exclude --no-ignore-files -L|--follow --json --vimgrep --column --no-heading --heading -p|--pretty --max-columns-preview -U|--multiline --multiline-dotall -P|--pcre2 -z|--search-zip -a|--text --binary --trim -0|--null --null-data --stats --debug --trace --no-messages --no-config --crlf --passthru --line-buffered --block-buffered -b|--byte-offset --one-file-system --no-unicode --include-zero --mmap --no-mmap -h|--help -V|--version --sort-files --glob-case-insensitive --ignore-file-case-insensitive"),
		list(o("-e|--regexp=", KPattern), o("-f|--file=", R), o("-r|--replace="), o("-g|--glob=", KPattern), o("--iglob=", KPattern), o("-t|--type="), o("-T|--type-not="), o("--type-add="), o("--type-clear="), o("--ignore-file=", R), o("-d|--max-depth|--maxdepth="), o("-m|--max-count="), o("-A|--after-context="), o("-B|--before-context="), o("-C|--context="), o("--context-separator="), o("--color="), o("--colors="), o("--sort="), o("--sortr="), o("-j|--threads="), o("-M|--max-columns="), o("--max-filesize="), o("--engine="), o("-E|--encoding="), o("--field-match-separator="), o("--field-context-separator="), o("--path-separator="), o("--hyperlink-format="), o("--generate="), o("--pre-glob=", KPattern),
			o("--pre=").denyWith("runs a preprocessor program on every file"), o("--hostname-bin=").denyWith("runs a program to get the host name")))}})
}

func postRg(p *parsed) {
	p.recursive = true
	if p.has("--files", "--type-list", "-e", "-f") {
		return
	}
	if len(p.operands) > 0 {
		p.operands[0].kind = KPattern
	}
}
