package devtools

import (
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

// postMake: a command-line assignment is make code too when it expands
// ($(shell), $(file)) or picks the shell or the makefiles, like the refused
// --eval; plain NAME=value assignments (CC=clang) pass.
func postMake(p *grammar.Parsed) {
	for _, op := range p.Operands {
		left, val, ok := strings.Cut(op.Value, "=")
		if !ok {
			continue
		}
		left = strings.TrimSpace(left)
		name := strings.TrimRight(left, ":!+?")
		immediate := strings.HasSuffix(left, ":") || strings.HasSuffix(left, "!") // := ::= !=
		if immediate || strings.ContainsAny(val, "$`") || makeControlVars[name] {
			p.Deny(verdict.RiskCritical, "make %s: this assignment is make code (it expands, is immediate, or sets %s), like the refused --eval", grammar.Clip(op.Value), name)
		}
	}
}

// makeControlVars choose the shell or the makefiles make reads.
var makeControlVars = grammar.Set("SHELL .SHELLFLAGS MAKEFILES MAKEFLAGS MFLAGS MAKE GNUMAKEFLAGS")

var _ = toolspec.Family(registerMake)

// registerMake: make (recipes are project code) and gmake.
func registerMake() {
	R := grammar.KPathRead
	mk := &grammar.CmdSpec{Code: true, Write: true, Operand: grammar.KOther, Post: postMake, Opts: grammar.Opts(grammar.Flags("-k|--keep-going -s|--silent|--quiet --no-silent -n|--dry-run|--just-print|--recon -B|--always-make -i|--ignore-errors -e|--environment-overrides -q|--question -r|--no-builtin-rules -R|--no-builtin-variables -w|--print-directory --no-print-directory -t|--touch -d -p|--print-data-base --trace --warn-undefined-variables -L|--check-symlink-times -S|--no-keep-going|--stop -v|--version -h|--help"),
		grammar.List(grammar.O("-C|--directory=", R).MovesDir(), grammar.O("-f|--file|--makefile=", R), grammar.O("-j|--jobs?"), grammar.O("-l|--load-average|--max-load?"), grammar.O("-O|--output-sync?"), grammar.O("-W|--what-if|--new-file|--assume-new=", R), grammar.O("-o|--old-file|--assume-old=", R), grammar.O("--debug?"), grammar.O("-I|--include-dir=", R), grammar.O("--shuffle?"), grammar.O("--jobserver-style="),
			grammar.O("-E|--eval=").DenyWith("evaluates make code given on the command line")))}
	toolspec.Register("make", &toolspec.ToolSpec{Grammar: mk, Entry: &toolspec.EntryFiles{Names: []string{"GNUmakefile", "makefile", "Makefile"}, Chdir: "-C", Extra: makeFiles}, Runs: []string{"git"},
		ExecEnv: map[string]string{"MAKEFLAGS": ""}}) // options and variables come from the argv only
	toolspec.Reg("gmake", mk)

}

// makeFiles: make -f names the makefiles it reads.
func makeFiles(pc *grammar.Parsed, dir, _ string, _ []string) []string {
	return toolspec.OptionFiles(pc, dir, "-f")
}
