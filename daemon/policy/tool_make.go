package policy

import (
	"strings"
)

// postMake: a command-line assignment is make code too when it expands
// ($(shell), $(file)) or picks the shell or the makefiles, like the refused
// --eval; plain NAME=value assignments (CC=clang) pass.
func postMake(p *parsed) {
	for _, op := range p.operands {
		left, val, ok := strings.Cut(op.value, "=")
		if !ok {
			continue
		}
		left = strings.TrimSpace(left)
		name := strings.TrimRight(left, ":!+?")
		immediate := strings.HasSuffix(left, ":") || strings.HasSuffix(left, "!") // := ::= !=
		if immediate || strings.ContainsAny(val, "$`") || makeControlVars[name] {
			p.deny(RiskCritical, "make %s: this assignment is make code (it expands, is immediate, or sets %s), like the refused --eval", clip(op.value), name)
		}
	}
}

// makeControlVars choose the shell or the makefiles make reads.
var makeControlVars = set("SHELL .SHELLFLAGS MAKEFILES MAKEFLAGS MFLAGS MAKE GNUMAKEFLAGS")

var _ = family(registerMake)

// registerMake: make (recipes are project code) and gmake.
func registerMake() {
	R := KPathRead
	mk := &cmdSpec{code: true, write: true, operand: KOther, post: postMake, opts: opts(flags("-k|--keep-going -s|--silent|--quiet --no-silent -n|--dry-run|--just-print|--recon -B|--always-make -i|--ignore-errors -e|--environment-overrides -q|--question -r|--no-builtin-rules -R|--no-builtin-variables -w|--print-directory --no-print-directory -t|--touch -d -p|--print-data-base --trace --warn-undefined-variables -L|--check-symlink-times -S|--no-keep-going|--stop -v|--version -h|--help"),
		list(o("-C|--directory=", R).movesDir(), o("-f|--file|--makefile=", R), o("-j|--jobs?"), o("-l|--load-average|--max-load?"), o("-O|--output-sync?"), o("-W|--what-if|--new-file|--assume-new=", R), o("-o|--old-file|--assume-old=", R), o("--debug?"), o("-I|--include-dir=", R), o("--shuffle?"), o("--jobserver-style="),
			o("-E|--eval=").denyWith("evaluates make code given on the command line")))}
	register("make", &toolSpec{grammar: mk, entry: &entryFiles{names: []string{"GNUmakefile", "makefile", "Makefile"}, chdir: "-C", extra: makeFiles}, runs: []string{"git"},
		execEnv: map[string]string{"MAKEFLAGS": ""}}) // options and variables come from the argv only
	reg("gmake", mk)

}

// makeFiles: make -f names the makefiles it reads.
func makeFiles(pc *parsed, dir, _ string, _ []string) []string { return optionFiles(pc, dir, "-f") }
