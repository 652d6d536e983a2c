package policy

import (
	"regexp"
	"strings"
)

// Grammars of everyday read-only tools: system information (uname, id, ps,
// free, ...), file inspection (tree, realpath, checksums, cmp, od, xxd,
// strings) and JSON (jq). Their rules are in the policy file.

var numberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$`)

// lessSecure: on a terminal less (and more) takes commands; secure mode has
// none that run programs, edit or write files.
var lessSecure = map[string]string{"LESSSECURE": "1"}

var _ = family(registerInfoTools)

func registerInfoTools() {
	R, W := KPathRead, KPathWrite
	std := "--help --version"
	reg("which", &cmdSpec{operand: KOther, opts: flags("-a|--all -s --skip-alias --skip-functions --skip-dot --skip-tilde --show-dot --show-tilde --tty-only -i|--read-alias --read-functions -v|-V " + std)})
	reg("uname", &cmdSpec{post: noOperands("uname takes no operands"), opts: flags("-a|--all -s|--kernel-name -n|--nodename -r|--kernel-release -v|--kernel-version -m|--machine -p|--processor -i|--hardware-platform -o|--operating-system " + std)})
	reg("whoami", &cmdSpec{post: noOperands("whoami takes no operands"), opts: flags(std)})
	reg("id", &cmdSpec{operand: KOther, opts: flags("-u|--user -g|--group -G|--groups -n|--name -r|--real -z|--zero -a -Z|--context " + std)})
	reg("uptime", &cmdSpec{post: noOperands("uptime takes no operands"), opts: flags("-p|--pretty -s|--since -c|--container -r|--raw -h|--help -V|--version")})
	reg("free", &cmdSpec{post: noOperands("free takes no operands"), opts: opts(flags("-b|--bytes -k|--kibi -m|--mebi -g|--gibi --tebi --pebi --kilo --mega --giga --tera --peta -h|--human --si -l|--lohi -L|--line -t|--total -v|--committed -w|--wide --help -V|--version"), list(o("-s|--seconds="), o("-c|--count=")))})
	reg("hostname", &cmdSpec{post: noOperands("hostname NAME sets the host name"), opts: opts(flags("-s|--short -f|--fqdn|--long -d|--domain -i|--ip-address -I|--all-ip-addresses -A|--all-fqdns -a|--alias -y|--yp|--nis -v|--verbose -h|--help -V|--version"),
		list(o("-F|--file=").denyWith("sets the host name from a file"), o("-b|--boot").denyWith("sets the host name")))})
	reg("seq", &cmdSpec{operand: KOther, operandLike: numberRE.MatchString, opts: opts(flags("-w|--equal-width "+std), list(o("-f|--format="), o("-s|--separator=")))})
	register("realpath", &toolSpec{namesOnly: true, grammar: &cmdSpec{operand: R, opts: opts(flags("-e|--canonicalize-existing -m|--canonicalize-missing -L|--logical -P|--physical -q|--quiet -s|--strip|--no-symlinks -z|--zero "+std), list(o("--relative-to=", R), o("--relative-base=", R)))}})
	reg("sha256sum|sha1sum|sha224sum|sha384sum|sha512sum|md5sum|b2sum", &cmdSpec{operand: R, opts: opts(flags("-b|--binary -t|--text -z|--zero --tag --ignore-missing --quiet --status --strict -w|--warn "+std), list(o("-l|--length="),
		o("-c|--check").denyWith("reads and hashes the files named in a list (the names are not checked)")))})
	reg("cmp", &cmdSpec{operand: R, opts: opts(flags("-b|--print-bytes -l|--verbose -s|--quiet|--silent --help -v|--version"), list(o("-i|--ignore-initial="), o("-n|--bytes=")))})
	reg("comm", &cmdSpec{operand: R, opts: opts(flags("-1 -2 -3 --check-order --nocheck-order --total -z|--zero-terminated "+std), list(o("--output-delimiter=")))})
	reg("column", &cmdSpec{operand: R, opts: opts(flags("-t|--table -x|--fillrows -J|--json -L|--keep-empty-lines -d|--table-noheadings -e|--table-header-repeat -h|--help -V|--version"),
		list(o("-s|--separator="), o("-o|--output-separator="), o("-c|--output-width="), o("-N|--table-columns="), o("-l|--table-columns-limit="), o("-R|--table-right="), o("-T|--table-truncate="), o("-E|--table-noextreme="), o("-W|--table-wrap="), o("-H|--table-hide="), o("-O|--table-order="), o("-n|--table-name="), o("-r|--tree="), o("-i|--tree-id="), o("-p|--tree-parent="), o("-C|--table-column=")))})
	// xxd INFILE OUTFILE writes OUTFILE.
	reg("xxd", &cmdSpec{operand: R, hasLast: true, last: W, longSingleDash: true, opts: opts(flags("-a|-autoskip -b|-bits -C|-capitalize -E|-EBCDIC -e -i|-include -p|-ps|-postscript|-plain -r|-revert -u -d -h|-help -v|-version"),
		list(o("-c|-cols="), o("-g|-groupsize="), o("-l|-len="), o("-o|-offset="), o("-s|-seek="), o("-n|-name=")))})
	reg("od", &cmdSpec{operand: R, opts: opts(flags("-b -c -d -f -i -l -o -s -x -v|--output-duplicates --traditional "+std), list(o("-A|--address-radix="), o("-j|--skip-bytes="), o("-N|--read-bytes="), o("-S|--strings?"), o("-t|--format="), o("-w|--width?"), o("--endian=")))})
	reg("strings", &cmdSpec{operand: R, numFlag: "-n", post: noResponseFiles, opts: opts(flags("-a|--all -d|--data -f|--print-file-name -w|--include-all-whitespace -h|--help -v|-V|--version"), list(o("-n|--bytes="), o("-t|--radix="), o("-e|--encoding="), o("-s|--output-separator="), o("-T|--target="), o("-U|--unicode=")))})
	reg("tree", &cmdSpec{operand: R, post: func(p *parsed) { p.recursive = true }, opts: opts(flags("-a -d -l -f -x -q -N -Q -p -u -g -s -h -D -F -v -t -c -U -r -C -n -A -S -i --inodes --device --noreport --dirsfirst --filesfirst --si --du --prune --gitignore --metafirst --help --version --fromtabfile --nolinks -J -X"),
		list(o("-L="), o("-P="), o("-I="), o("--filelimit="), o("--timefmt="), o("--sort="), o("--charset="), o("-H="), o("-T="), o("--matchdirs"), o("--ignore-case"), o("--fromfile"), o("--infofile=", R), o("--gitfile=", R), o("--hintro=", R), o("--houtro=", R),
			o("-o=", W), o("-R").denyWith("writes 00Tree.html into every directory it lists")))})
	// Pagers and process viewers are interactive-safe on a terminal: less
	// runs with LESSSECURE (no shell, editor, pipe or log commands, no
	// writes) and, read-only, may execute nothing else.
	register("more", &toolSpec{execEnv: lessSecure, grammar: &cmdSpec{operand: R, interactive: true, post: noLessCommands, opts: opts(flags("-d|--silent -l|--logical -f|--no-pause -p|--print-over -c|--clean-print -s|--squeeze -u|--plain -h|--help -V|--version"), list(o("-n|--lines=")))}})
	reg("top", &cmdSpec{interactive: true, post: noOperands("top takes no operands"), opts: opts(flags("-b|--batch -c|--cmdline-toggle -H|--threads-show -i|--idle-toggle -S|--accum-time-toggle -1|--single-cpu-toggle -s|--secure-mode -h|--help -V|--version"),
		list(o("-d|--delay="), o("-n|--iterations="), o("-p|--pid="), o("-u|--filter-only-euser="), o("-U|--filter-any-user="), o("-o|--sort-override="), o("-E|--scale-summary-mem="), o("-e|--scale-task-mem="), o("-w|--width?")))})
	reg("htop", &cmdSpec{interactive: true, post: noOperands("htop takes no operands"), opts: opts(flags("-C|--no-color|--no-colour -t|--tree -M|--no-mouse -H|--highlight-changes --readonly -h|--help -V|--version"),
		list(o("-d|--delay="), o("-u|--user?"), o("-p|--pid="), o("-s|--sort-key="), o("-F|--filter=")))})
	register("less", &toolSpec{execEnv: lessSecure, grammar: &cmdSpec{operand: R, interactive: true, post: noLessCommands, opts: flags("-N|--LINE-NUMBERS -n|--line-numbers -S|--chop-long-lines -R|--RAW-CONTROL-CHARS -r|--raw-control-chars -F|--quit-if-one-screen -X|--no-init -i|--ignore-case -I|--IGNORE-CASE -s|--squeeze-blank-lines -E|--QUIT-AT-EOF -e|--quit-at-eof -f|--force -q|--quiet|--silent -Q|--QUIET|--SILENT -V|--version --help")}})
	reg("jq", &cmdSpec{custom: parseJq})
	reg("ps", &cmdSpec{custom: parsePs})
	reg("lsof", &cmdSpec{custom: parseLsof})
}

// noOperands refuses operands (hostname NAME would set the host name).
func noOperands(why string) func(*parsed) {
	return func(p *parsed) {
		if len(p.operands) > 0 {
			p.deny(RiskHigh, "%s", why)
		}
	}
}

// noResponseFiles refuses binutils' @FILE, which reads more options from a file.
func noResponseFiles(p *parsed) {
	for _, op := range p.operands {
		if strings.HasPrefix(op.value, "@") {
			p.deny(RiskHigh, "%s %s reads options from a file (not checked)", p.tool, clip(op.value))
		}
	}
}

// noLessCommands refuses less's +COMMAND operands (commands run at start).
func noLessCommands(p *parsed) {
	for _, op := range p.operands {
		if strings.HasPrefix(op.value, "+") {
			p.deny(RiskHigh, "less %s runs a less command at start (a less command can run programs)", clip(op.value))
		}
	}
}

// jqFlags are jq's options without values; short ones may be bundled (-rc).
var jqFlags = set("-r --raw-output -j --join-output -c --compact-output -s --slurp -n --null-input -e --exit-status -S --sort-keys -C --color-output -M --monochrome-output -a --ascii-output --tab --seq --stream --stream-errors -R --raw-input --raw-output0 --unbuffered -h --help -V --version --build-configuration")

// parseJq reads jq [OPTIONS] FILTER [FILES...]. jq cannot run programs or
// write files; what it reads is its operands, --slurpfile/--rawfile files,
// and modules (import/include, -L, -f), which are refused as unchecked.
func parseJq(p *parsed, args []string) error {
	filter, positional := false, false
	use := func(name string) { p.opts = append(p.opts, optUse{opt: &opt{names: []string{name}}, name: name}) }
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			positional = filter // after the filter, -- ends options; the rest are files
			for _, rest := range args[i+1:] {
				if !filter {
					filter = true
					p.operands = append(p.operands, jqFilter(p, rest))
					continue
				}
				p.operands = append(p.operands, operand{value: rest, kind: map[bool]Kind{true: KOther, false: KPathRead}[positional]})
			}
			return nil
		case a == "--args" || a == "--jsonargs":
			use(a)
			positional = true
		case jqFlags[a]:
			use(a)
		case a == "--indent":
			use(a)
			i++
		case a == "--arg" || a == "--argjson":
			use(a)
			if i+2 >= len(args) {
				return errf("%s needs a name and a value", a)
			}
			i += 2
		case a == "--slurpfile" || a == "--rawfile":
			use(a)
			if i+2 >= len(args) {
				return errf("%s needs a name and a file", a)
			}
			p.paths = append(p.paths, operand{value: args[i+2], kind: KPathRead})
			i += 2
		case a == "-f" || a == "--from-file" || strings.HasPrefix(a, "--from-file="):
			use("-f")
			p.deny(RiskHigh, "jq -f reads a jq program from a file (%s)", whyUnchecked)
			return nil
		case a == "-L" || strings.HasPrefix(a, "-L") || strings.HasPrefix(a, "--library-path"):
			use("-L")
			p.deny(RiskHigh, "jq -L loads modules and data files from a directory (not checked)")
			return nil
		case strings.HasPrefix(a, "--"):
			return errf("unknown option %s", clip(a))
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for _, c := range a[1:] {
				if !jqFlags["-"+string(c)] {
					return errf("unknown option %s", clip(a))
				}
			}
			use(a)
		case !filter:
			filter = true
			p.operands = append(p.operands, jqFilter(p, a))
		default:
			p.operands = append(p.operands, operand{value: a, kind: map[bool]Kind{true: KOther, false: KPathRead}[positional]})
		}
	}
	return nil
}

var jqModuleRE = regexp.MustCompile(`\b(import|include)\b|\bmodulemeta\b|\bget_search_list\b`)

// jqFilter is the filter operand; module directives are refused (they read
// files named inside the filter).
func jqFilter(p *parsed, f string) operand {
	if jqModuleRE.MatchString(f) {
		p.deny(RiskHigh, "jq import/include loads modules and data files that are not checked")
	}
	return operand{value: f, kind: KOther}
}

// parsePs reads ps's three option styles as data, refusing what shows other
// processes' environments (secrets: API keys, tokens): the BSD e option and
// any format naming env/environ (in whatever spelling: -o, -eo, o, --format).
func parsePs(p *parsed, args []string) error {
	for _, a := range args {
		p.operands = append(p.operands, operand{value: a, kind: KOther})
		if strings.Contains(strings.ToLower(a), "env") {
			p.deny(RiskHigh, "ps %s shows other processes' environments (they hold secrets)", clip(a))
		}
		if !strings.HasPrefix(a, "-") && strings.ContainsRune(a, 'e') && isPsBSDWord(a) {
			p.deny(RiskHigh, "ps %s: the BSD e option shows other processes' environments (they hold secrets)", clip(a))
		}
	}
	return nil
}

// isPsBSDWord says whether a is a word of BSD-style ps options (aux, axjf)
// rather than a value (a pid list, a user name follows other options).
var psBSDRE = regexp.MustCompile(`^[aAcefhjlLmMnrsSTuvwxXZ]+$`)

func isPsBSDWord(a string) bool { return psBSDRE.MatchString(a) }

// parseLsof reads lsof's options as data. -D manages a device cache file
// (it writes it).
func parseLsof(p *parsed, args []string) error {
	for _, a := range args {
		if strings.HasPrefix(a, "-D") {
			p.deny(RiskHigh, "lsof -D reads or writes a device cache file")
		}
		p.operands = append(p.operands, operand{value: a, kind: KOther})
	}
	return nil
}
