package policy

import (
	"strings"
)

var _ = family(registerText)

// Text and file inspection tools: ls, cat, grep, sort, diff, ... (and
// echo-like tools whose arguments are all data).
func registerText() {
	R, W := KPathRead, KPathWrite
	register("ls", &toolSpec{namesOnly: true, grammar: &cmdSpec{operand: R, post: func(p *parsed) { p.recursive = p.has("-R") }, opts: opts(flags("-a|--all -A|--almost-all -l -h|--human-readable -R|--recursive -t -S -r|--reverse -1 -d|--directory -F -i|--inode -s|--size -G|--no-group -n|--numeric-uid-gid -X -U -v -c -u -g -o -p -m -x -C -L|--dereference -H|--dereference-command-line -k|--kibibytes -Q|--quote-name -N|--literal -b|--escape -q|--hide-control-chars -f -B|--ignore-backups -Z|--context -D|--dired --si --author --full-time --group-directories-first --file-type --show-control-chars"),
		list(o("--color?"), o("--classify?"), o("--hyperlink?"), o("--time-style="), o("--sort="), o("--time="), o("-I|--ignore="), o("--hide="), o("-w|--width="), o("--block-size="), o("--indicator-style="), o("--format="), o("--quoting-style="), o("-T|--tabsize="), o("--help"), o("--version")))}})
	reg("cat", &cmdSpec{operand: R, opts: flags("-A|--show-all -b|--number-nonblank -e -E|--show-ends -n|--number -s|--squeeze-blank -t -T|--show-tabs -u -v|--show-nonprinting --help --version")})
	headOpts := list(o("-n|--lines="), o("-c|--bytes="), o("-q|--quiet|--silent"), o("-v|--verbose"), o("-z|--zero-terminated"), o("--help"), o("--version"))
	reg("head", &cmdSpec{operand: R, numFlag: "-n", opts: headOpts})
	reg("tail", &cmdSpec{operand: R, numFlag: "-n", opts: opts(headOpts, list(o("-f"), o("--follow?"), o("-F"), o("--retry"), o("-s|--sleep-interval="), o("--pid="), o("--max-unchanged-stats=")))})
	reg("wc", &cmdSpec{operand: R, opts: opts(flags("-c|--bytes -m|--chars -l|--lines -w|--words -L|--max-line-length --help --version"), list(o("--files0-from=", R), o("--total=")))})
	register("stat", &toolSpec{namesOnly: true, grammar: &cmdSpec{operand: R, opts: opts(flags("-L|--dereference -f|--file-system -t|--terse --help --version"), list(o("-c|--format="), o("--printf="), o("--cached=")))}})
	reg("file", &cmdSpec{operand: R, opts: opts(flags("-b|--brief -i|--mime --mime-type --mime-encoding -L|--dereference -h|--no-dereference -z|--uncompress -Z|--uncompress-noreport -k|--keep-going -s|--special-files -N|--no-pad -0|--print0 -r|--raw -E -l|--list --extension --apple -p|--preserve-date --help -v|--version"),
		list(o("-m|--magic-file=", R), o("-f|--files-from=", R), o("-F|--separator="), o("-e|--exclude="), o("-P|--parameter="), o("-S|--no-sandbox").denyWith("disables the seccomp sandbox")))})
	reg("du", &cmdSpec{operand: R, opts: opts(flags("-a|--all -h|--human-readable -s|--summarize -c|--total -k -m -b|--bytes -x|--one-file-system -L|--dereference -P|--no-dereference -H|--dereference-args -D -0|--null -l|--count-links -S|--separate-dirs --si --apparent-size --inodes --help --version"),
		list(o("-d|--max-depth="), o("--exclude="), o("-X|--exclude-from=", R), o("-t|--threshold="), o("--time?"), o("--time-style="), o("-B|--block-size="), o("--files0-from=", R)))})
	register("df", &toolSpec{namesOnly: true, grammar: &cmdSpec{operand: R, opts: opts(flags("-h|--human-readable -H|--si -a|--all -i|--inodes -k -l|--local -P|--portability -T|--print-type --total --sync --no-sync --help --version"), list(o("-t|--type="), o("-x|--exclude-type="), o("--output?"), o("-B|--block-size=")))}})
	reg("pwd", &cmdSpec{opts: flags("-L|--logical -P|--physical --help --version")})
	grepOpts := opts(flags("-E|--extended-regexp -F|--fixed-strings -G|--basic-regexp -P|--perl-regexp -i|-y|--ignore-case --no-ignore-case -v|--invert-match -w|--word-regexp -x|--line-regexp -c|--count -l|--files-with-matches -L|--files-without-match -n|--line-number -h|--no-filename -H|--with-filename -o|--only-matching -q|--quiet|--silent -s|--no-messages -r|--recursive -R|--dereference-recursive -a|--text -I -U|--binary -z|--null-data -Z|--null -b|--byte-offset -T|--initial-tab --line-buffered --help -V|--version"),
		list(o("--color?"), o("--colour?"), o("-e|--regexp=", KPattern), o("-f|--file=", R), o("-m|--max-count="), o("-A|--after-context="), o("-B|--before-context="), o("-C|--context="), o("--include="), o("--exclude="), o("--exclude-dir="), o("--exclude-from=", R), o("--label="), o("--binary-files="), o("-D|--devices="), o("-d|--directories=")))
	reg("grep|egrep|fgrep", &cmdSpec{operand: R, opts: grepOpts, post: postPatternFirst("-e", "-f")})
	reg("sort", &cmdSpec{operand: R, opts: opts(flags("-b|--ignore-leading-blanks -d|--dictionary-order -f|--ignore-case -g|--general-numeric-sort -i|--ignore-nonprinting -M|--month-sort -h|--human-numeric-sort -n|--numeric-sort -R|--random-sort -r|--reverse -V|--version-sort -c -C -m|--merge -s|--stable -u|--unique -z|--zero-terminated --debug --help --version"),
		list(o("--check?"), o("-k|--key="), o("-t|--field-separator="), o("-o|--output=", W), o("-S|--buffer-size="), o("-T|--temporary-directory=", W), o("--parallel="), o("--files0-from=", R).denyWith("reads and prints the files named in a list (the names are not checked)"), o("--random-source=", R), o("--sort="), o("--batch-size="), o("--compress-program=").denyWith(whyExec)))})
	reg("uniq", &cmdSpec{operand: R, hasLast: true, last: W, opts: opts(flags("-c|--count -d|--repeated -D -u|--unique -i|--ignore-case -z|--zero-terminated --help --version"), list(o("--all-repeated?"), o("--group?"), o("-f|--skip-fields="), o("-s|--skip-chars="), o("-w|--check-chars=")))})
	reg("cut", &cmdSpec{operand: R, opts: opts(flags("-s|--only-delimited -n --complement -z|--zero-terminated --help --version"), list(o("-b|--bytes="), o("-c|--characters="), o("-f|--fields="), o("-d|--delimiter="), o("--output-delimiter=")))})
	reg("tr", &cmdSpec{operand: KOther, opts: flags("-c|-C|--complement -d|--delete -s|--squeeze-repeats -t|--truncate-set1 --help --version")})
	register("diff", &toolSpec{derivedReads: diffReads, grammar: &cmdSpec{operand: R, post: func(p *parsed) { p.recursive = p.has("-r") }, opts: opts(flags("-u -c -q|--brief -r|--recursive -N|--new-file -i|--ignore-case -w|--ignore-all-space -b|--ignore-space-change -B|--ignore-blank-lines -E|--ignore-tab-expansion -Z|--ignore-trailing-space -a|--text -y|--side-by-side -p|--show-c-function -s|--report-identical-files --strip-trailing-cr -t|--expand-tabs -T|--initial-tab --suppress-common-lines -l|--paginate --no-dereference -d|--minimal --speed-large-files --normal -e|--ed -n|--rcs --ignore-file-name-case --no-ignore-file-name-case --unidirectional-new-file --left-column --suppress-blank-empty --help -v|--version"),
		list(o("-U|--unified?"), o("-C|--context?"), o("--color?"), o("-W|--width="), o("-F|--show-function-line="), o("--label="), o("-x|--exclude="), o("-X|--exclude-from=", R), o("-S|--starting-file="), o("--from-file=", R), o("--to-file=", R), o("-I|--ignore-matching-lines="), o("--horizon-lines="), o("-D|--ifdef="), o("--tabsize="), o("--line-format="), o("--old-line-format="), o("--new-line-format="), o("--unchanged-line-format="), o("--old-group-format="), o("--new-group-format="), o("--changed-group-format="), o("--unchanged-group-format="), o("--palette=")))}})
	reg("sleep", &cmdSpec{opts: flags("--help --version")})
	reg("date", &cmdSpec{post: postDate, opts: opts(flags("-R|--rfc-email -u|--utc|--universal --debug --help --version"), list(o("-d|--date="), o("-f|--file=", R), o("-I|--iso-8601?"), o("--rfc-3339="), o("-r|--reference=", R), o("-s|--set=").denyWith("sets the system clock")))})
	reg("env", &cmdSpec{posix: true, opts: opts(flags("-i|--ignore-environment -0|--null -v|--debug --help --version"), list(o("-u|--unset="), o("-C|--chdir=", R).movesDir(), o("-S|--split-string=").denyWith("splits a string into a command"), o("--default-signal?"), o("--ignore-signal?"), o("--block-signal?"), o("--list-signal-handling")))})
	// Free-form tools: every argument is data.
	for _, n := range []string{"echo", "printf", "true", "false", "yes"} {
		reg(n, &cmdSpec{free: true})
	}
}

// diffPairReads: diff DIR FILE compares DIR/basename(FILE), so that file is
// read too (also with --from-file / --to-file; git diff outside a work tree
// does the same). dir is where the command works.
func diffPairReads(pc *parsed, dir string) []string {
	var out []string
	var pairs [][2]string
	from, to := pc.values("--from-file"), pc.values("--to-file")
	for _, op := range pc.operands {
		for _, f := range from {
			pairs = append(pairs, [2]string{f, op.value})
		}
		for _, t := range to {
			pairs = append(pairs, [2]string{op.value, t})
		}
	}
	if len(from) == 0 && len(to) == 0 && len(pc.operands) == 2 {
		pairs = append(pairs, [2]string{pc.operands[0].value, pc.operands[1].value})
	}
	for _, pr := range pairs {
		a, b := resolvePath(dir, pr[0]), resolvePath(dir, pr[1])
		if da, db := isDir(a), isDir(b); da != db {
			d, file := a, pr[1]
			if db {
				d, file = b, pr[0]
			}
			out = append(out, d+"/"+baseName(file))
		}
	}
	return out
}

func postPatternFirst(e, f string) func(*parsed) {
	return func(p *parsed) {
		p.recursive = p.has("-r", "-R") || contains(p.values("-d"), "recurse")
		if !p.has(e, f) && len(p.operands) > 0 {
			p.operands[0].kind = KPattern
		}
	}
}

func postDate(p *parsed) {
	for _, op := range p.operands {
		if !strings.HasPrefix(op.value, "+") {
			p.deny(RiskHigh, "date: operand %q sets the system clock", clip(op.value))
		}
	}
}

func diffReads(c *toolCall) []string { return diffPairReads(c.pc, c.cwd) }
