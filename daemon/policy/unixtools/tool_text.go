// Package unixtools holds the specs of the everyday Unix tools: text and
// file inspection (ls, cat, grep, rg, fd, find, sed, awk, diff, ...), file
// changes (cp, mv, rm, chmod, ...), archives, system information, pagers
// and the network clients curl and wget. Each file registers its family
// with toolspec.Family; it imports toolspec, grammar and verdict.
package unixtools

import (
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

var _ = toolspec.Family(registerText)

// Text and file inspection tools: ls, cat, grep, sort, diff, ... (and
// echo-like tools whose arguments are all data).
func registerText() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	toolspec.Register("ls", &toolspec.ToolSpec{NamesOnly: true, Grammar: &grammar.CmdSpec{Operand: R, Post: func(p *grammar.Parsed) { p.Recursive = p.Has("-R") }, Opts: grammar.Opts(grammar.Flags("-a|--all -A|--almost-all -l -h|--human-readable -R|--recursive -t -S -r|--reverse -1 -d|--directory -F -i|--inode -s|--size -G|--no-group -n|--numeric-uid-gid -X -U -v -c -u -g -o -p -m -x -C -L|--dereference -H|--dereference-command-line -k|--kibibytes -Q|--quote-name -N|--literal -b|--escape -q|--hide-control-chars -f -B|--ignore-backups -Z|--context -D|--dired --si --author --full-time --group-directories-first --file-type --show-control-chars"),
		grammar.List(grammar.O("--color?"), grammar.O("--classify?"), grammar.O("--hyperlink?"), grammar.O("--time-style="), grammar.O("--sort="), grammar.O("--time="), grammar.O("-I|--ignore="), grammar.O("--hide="), grammar.O("-w|--width="), grammar.O("--block-size="), grammar.O("--indicator-style="), grammar.O("--format="), grammar.O("--quoting-style="), grammar.O("-T|--tabsize="), grammar.O("--help"), grammar.O("--version")))}})
	toolspec.Reg("cat", &grammar.CmdSpec{Operand: R, Opts: grammar.Flags("-A|--show-all -b|--number-nonblank -e -E|--show-ends -n|--number -s|--squeeze-blank -t -T|--show-tabs -u -v|--show-nonprinting --help --version")})
	headOpts := grammar.List(grammar.O("-n|--lines="), grammar.O("-c|--bytes="), grammar.O("-q|--quiet|--silent"), grammar.O("-v|--verbose"), grammar.O("-z|--zero-terminated"), grammar.O("--help"), grammar.O("--version"))
	toolspec.Reg("head", &grammar.CmdSpec{Operand: R, NumFlag: "-n", Opts: headOpts})
	toolspec.Reg("tail", &grammar.CmdSpec{Operand: R, NumFlag: "-n", Opts: grammar.Opts(headOpts, grammar.List(grammar.O("-f"), grammar.O("--follow?"), grammar.O("-F"), grammar.O("--retry"), grammar.O("-s|--sleep-interval="), grammar.O("--pid="), grammar.O("--max-unchanged-stats=")))})
	toolspec.Reg("wc", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-c|--bytes -m|--chars -l|--lines -w|--words -L|--max-line-length --help --version"), grammar.List(grammar.O("--files0-from=", R), grammar.O("--total=")))})
	toolspec.Register("stat", &toolspec.ToolSpec{NamesOnly: true, Grammar: &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-L|--dereference -f|--file-system -t|--terse --help --version"), grammar.List(grammar.O("-c|--format="), grammar.O("--printf="), grammar.O("--cached=")))}})
	toolspec.Reg("file", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-b|--brief -i|--mime --mime-type --mime-encoding -L|--dereference -h|--no-dereference -z|--uncompress -Z|--uncompress-noreport -k|--keep-going -s|--special-files -N|--no-pad -0|--print0 -r|--raw -E -l|--list --extension --apple -p|--preserve-date --help -v|--version"),
		grammar.List(grammar.O("-m|--magic-file=", R), grammar.O("-f|--files-from=", R), grammar.O("-F|--separator="), grammar.O("-e|--exclude="), grammar.O("-P|--parameter="), grammar.O("-S|--no-sandbox").DenyWith("disables the seccomp sandbox")))})
	toolspec.Reg("du", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-a|--all -h|--human-readable -s|--summarize -c|--total -k -m -b|--bytes -x|--one-file-system -L|--dereference -P|--no-dereference -H|--dereference-args -D -0|--null -l|--count-links -S|--separate-dirs --si --apparent-size --inodes --help --version"),
		grammar.List(grammar.O("-d|--max-depth="), grammar.O("--exclude="), grammar.O("-X|--exclude-from=", R), grammar.O("-t|--threshold="), grammar.O("--time?"), grammar.O("--time-style="), grammar.O("-B|--block-size="), grammar.O("--files0-from=", R)))})
	toolspec.Register("df", &toolspec.ToolSpec{NamesOnly: true, Grammar: &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-h|--human-readable -H|--si -a|--all -i|--inodes -k -l|--local -P|--portability -T|--print-type --total --sync --no-sync --help --version"), grammar.List(grammar.O("-t|--type="), grammar.O("-x|--exclude-type="), grammar.O("--output?"), grammar.O("-B|--block-size=")))}})
	toolspec.Reg("pwd", &grammar.CmdSpec{Opts: grammar.Flags("-L|--logical -P|--physical --help --version")})
	grepOpts := grammar.Opts(grammar.Flags("-E|--extended-regexp -F|--fixed-strings -G|--basic-regexp -P|--perl-regexp -i|-y|--ignore-case --no-ignore-case -v|--invert-match -w|--word-regexp -x|--line-regexp -c|--count -l|--files-with-matches -L|--files-without-match -n|--line-number -h|--no-filename -H|--with-filename -o|--only-matching -q|--quiet|--silent -s|--no-messages -r|--recursive -R|--dereference-recursive -a|--text -I -U|--binary -z|--null-data -Z|--null -b|--byte-offset -T|--initial-tab --line-buffered --help -V|--version"),
		grammar.List(grammar.O("--color?"), grammar.O("--colour?"), grammar.O("-e|--regexp=", grammar.KPattern), grammar.O("-f|--file=", R), grammar.O("-m|--max-count="), grammar.O("-A|--after-context="), grammar.O("-B|--before-context="), grammar.O("-C|--context="), grammar.O("--include="), grammar.O("--exclude="), grammar.O("--exclude-dir="), grammar.O("--exclude-from=", R), grammar.O("--label="), grammar.O("--binary-files="), grammar.O("-D|--devices="), grammar.O("-d|--directories=")))
	toolspec.Reg("grep|egrep|fgrep", &grammar.CmdSpec{Operand: R, Opts: grepOpts, Post: PostPatternFirst("-e", "-f")})
	toolspec.Reg("sort", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-b|--ignore-leading-blanks -d|--dictionary-order -f|--ignore-case -g|--general-numeric-sort -i|--ignore-nonprinting -M|--month-sort -h|--human-numeric-sort -n|--numeric-sort -R|--random-sort -r|--reverse -V|--version-sort -c -C -m|--merge -s|--stable -u|--unique -z|--zero-terminated --debug --help --version"),
		grammar.List(grammar.O("--check?"), grammar.O("-k|--key="), grammar.O("-t|--field-separator="), grammar.O("-o|--output=", W), grammar.O("-S|--buffer-size="), grammar.O("-T|--temporary-directory=", W), grammar.O("--parallel="), grammar.O("--files0-from=", R).DenyWith("reads and prints the files named in a list (the names are not checked)"), grammar.O("--random-source=", R), grammar.O("--sort="), grammar.O("--batch-size="), grammar.O("--compress-program=").DenyWith(toolspec.WhyExec)))})
	toolspec.Reg("uniq", &grammar.CmdSpec{Operand: R, HasLast: true, Last: W, Opts: grammar.Opts(grammar.Flags("-c|--count -d|--repeated -D -u|--unique -i|--ignore-case -z|--zero-terminated --help --version"), grammar.List(grammar.O("--all-repeated?"), grammar.O("--group?"), grammar.O("-f|--skip-fields="), grammar.O("-s|--skip-chars="), grammar.O("-w|--check-chars=")))})
	toolspec.Reg("cut", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-s|--only-delimited -n --complement -z|--zero-terminated --help --version"), grammar.List(grammar.O("-b|--bytes="), grammar.O("-c|--characters="), grammar.O("-f|--fields="), grammar.O("-d|--delimiter="), grammar.O("--output-delimiter=")))})
	toolspec.Reg("tr", &grammar.CmdSpec{Operand: grammar.KOther, Opts: grammar.Flags("-c|-C|--complement -d|--delete -s|--squeeze-repeats -t|--truncate-set1 --help --version")})
	toolspec.Register("diff", &toolspec.ToolSpec{DerivedReads: diffReads, Grammar: &grammar.CmdSpec{Operand: R, Post: func(p *grammar.Parsed) { p.Recursive = p.Has("-r") }, Opts: grammar.Opts(grammar.Flags("-u -c -q|--brief -r|--recursive -N|--new-file -i|--ignore-case -w|--ignore-all-space -b|--ignore-space-change -B|--ignore-blank-lines -E|--ignore-tab-expansion -Z|--ignore-trailing-space -a|--text -y|--side-by-side -p|--show-c-function -s|--report-identical-files --strip-trailing-cr -t|--expand-tabs -T|--initial-tab --suppress-common-lines -l|--paginate --no-dereference -d|--minimal --speed-large-files --normal -e|--ed -n|--rcs --ignore-file-name-case --no-ignore-file-name-case --unidirectional-new-file --left-column --suppress-blank-empty --help -v|--version"),
		grammar.List(grammar.O("-U|--unified?"), grammar.O("-C|--context?"), grammar.O("--color?"), grammar.O("-W|--width="), grammar.O("-F|--show-function-line="), grammar.O("--label="), grammar.O("-x|--exclude="), grammar.O("-X|--exclude-from=", R), grammar.O("-S|--starting-file="), grammar.O("--from-file=", R), grammar.O("--to-file=", R), grammar.O("-I|--ignore-matching-lines="), grammar.O("--horizon-lines="), grammar.O("-D|--ifdef="), grammar.O("--tabsize="), grammar.O("--line-format="), grammar.O("--old-line-format="), grammar.O("--new-line-format="), grammar.O("--unchanged-line-format="), grammar.O("--old-group-format="), grammar.O("--new-group-format="), grammar.O("--changed-group-format="), grammar.O("--unchanged-group-format="), grammar.O("--palette=")))}})
	toolspec.Reg("sleep", &grammar.CmdSpec{Opts: grammar.Flags("--help --version")})
	toolspec.Reg("date", &grammar.CmdSpec{Post: postDate, Opts: grammar.Opts(grammar.Flags("-R|--rfc-email -u|--utc|--universal --debug --help --version"), grammar.List(grammar.O("-d|--date="), grammar.O("-f|--file=", R), grammar.O("-I|--iso-8601?"), grammar.O("--rfc-3339="), grammar.O("-r|--reference=", R), grammar.O("-s|--set=").DenyWith("sets the system clock")))})
	toolspec.Reg("env", &grammar.CmdSpec{Posix: true, Opts: grammar.Opts(grammar.Flags("-i|--ignore-environment -0|--null -v|--debug --help --version"), grammar.List(grammar.O("-u|--unset="), grammar.O("-C|--chdir=", R).MovesDir(), grammar.O("-S|--split-string=").DenyWith("splits a string into a command"), grammar.O("--default-signal?"), grammar.O("--ignore-signal?"), grammar.O("--block-signal?"), grammar.O("--list-signal-handling")))})
	// Free-form tools: every argument is data.
	for _, n := range []string{"echo", "printf", "true", "false", "yes"} {
		toolspec.Reg(n, &grammar.CmdSpec{Free: true})
	}
}

// DiffPairReads: diff DIR FILE compares DIR/basename(FILE), so that file is
// read too (also with --from-file / --to-file; git diff outside a work tree
// does the same). dir is where the command works.
func DiffPairReads(pc *grammar.Parsed, dir string) []string {
	var out []string
	var pairs [][2]string
	from, to := pc.Values("--from-file"), pc.Values("--to-file")
	for _, op := range pc.Operands {
		for _, f := range from {
			pairs = append(pairs, [2]string{f, op.Value})
		}
		for _, t := range to {
			pairs = append(pairs, [2]string{op.Value, t})
		}
	}
	if len(from) == 0 && len(to) == 0 && len(pc.Operands) == 2 {
		pairs = append(pairs, [2]string{pc.Operands[0].Value, pc.Operands[1].Value})
	}
	for _, pr := range pairs {
		a, b := toolspec.ResolvePath(dir, pr[0]), toolspec.ResolvePath(dir, pr[1])
		if da, db := toolspec.IsDir(a), toolspec.IsDir(b); da != db {
			d, file := a, pr[1]
			if db {
				d, file = b, pr[0]
			}
			out = append(out, d+"/"+grammar.BaseName(file))
		}
	}
	return out
}

func PostPatternFirst(e, f string) func(*grammar.Parsed) {
	return func(p *grammar.Parsed) {
		p.Recursive = p.Has("-r", "-R") || grammar.Contains(p.Values("-d"), "recurse")
		if !p.Has(e, f) && len(p.Operands) > 0 {
			p.Operands[0].Kind = grammar.KPattern
		}
	}
}

func postDate(p *grammar.Parsed) {
	for _, op := range p.Operands {
		if !strings.HasPrefix(op.Value, "+") {
			p.Deny(verdict.RiskHigh, "date: operand %q sets the system clock", grammar.Clip(op.Value))
		}
	}
}

func diffReads(c *toolspec.ToolCall) []string { return DiffPairReads(c.Pc, c.Cwd) }
