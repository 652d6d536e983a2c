package unixtools

import (
	"regexp"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

// Grammars of everyday read-only tools: system information (uname, id, ps,
// free, ...), file inspection (tree, realpath, checksums, cmp, od, xxd,
// strings) and JSON (jq). Their rules are in the policy file.

var numberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$`)

// lessSecure: on a terminal less (and more) takes commands; secure mode has
// none that run programs, edit or write files.
var lessSecure = map[string]string{"LESSSECURE": "1"}

var _ = toolspec.Family(registerInfoTools)

func registerInfoTools() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	std := "--help --version"
	toolspec.Reg("which", &grammar.CmdSpec{Operand: grammar.KOther, Opts: grammar.Flags("-a|--all -s --skip-alias --skip-functions --skip-dot --skip-tilde --show-dot --show-tilde --tty-only -i|--read-alias --read-functions -v|-V " + std)})
	toolspec.Reg("uname", &grammar.CmdSpec{Post: noOperands("uname takes no operands"), Opts: grammar.Flags("-a|--all -s|--kernel-name -n|--nodename -r|--kernel-release -v|--kernel-version -m|--machine -p|--processor -i|--hardware-platform -o|--operating-system " + std)})
	toolspec.Reg("whoami", &grammar.CmdSpec{Post: noOperands("whoami takes no operands"), Opts: grammar.Flags(std)})
	toolspec.Reg("id", &grammar.CmdSpec{Operand: grammar.KOther, Opts: grammar.Flags("-u|--user -g|--group -G|--groups -n|--name -r|--real -z|--zero -a -Z|--context " + std)})
	toolspec.Reg("uptime", &grammar.CmdSpec{Post: noOperands("uptime takes no operands"), Opts: grammar.Flags("-p|--pretty -s|--since -c|--container -r|--raw -h|--help -V|--version")})
	toolspec.Reg("free", &grammar.CmdSpec{Post: noOperands("free takes no operands"), Opts: grammar.Opts(grammar.Flags("-b|--bytes -k|--kibi -m|--mebi -g|--gibi --tebi --pebi --kilo --mega --giga --tera --peta -h|--human --si -l|--lohi -L|--line -t|--total -v|--committed -w|--wide --help -V|--version"), grammar.List(grammar.O("-s|--seconds="), grammar.O("-c|--count=")))})
	toolspec.Reg("hostname", &grammar.CmdSpec{Post: noOperands("hostname NAME sets the host name"), Opts: grammar.Opts(grammar.Flags("-s|--short -f|--fqdn|--long -d|--domain -i|--ip-address -I|--all-ip-addresses -A|--all-fqdns -a|--alias -y|--yp|--nis -v|--verbose -h|--help -V|--version"),
		grammar.List(grammar.O("-F|--file=").DenyWith("sets the host name from a file"), grammar.O("-b|--boot").DenyWith("sets the host name")))})
	toolspec.Reg("seq", &grammar.CmdSpec{Operand: grammar.KOther, OperandLike: numberRE.MatchString, Opts: grammar.Opts(grammar.Flags("-w|--equal-width "+std), grammar.List(grammar.O("-f|--format="), grammar.O("-s|--separator=")))})
	toolspec.Register("realpath", &toolspec.ToolSpec{NamesOnly: true, Grammar: &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-e|--canonicalize-existing -m|--canonicalize-missing -L|--logical -P|--physical -q|--quiet -s|--strip|--no-symlinks -z|--zero "+std), grammar.List(grammar.O("--relative-to=", R), grammar.O("--relative-base=", R)))}})
	toolspec.Reg("sha256sum|sha1sum|sha224sum|sha384sum|sha512sum|md5sum|b2sum", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-b|--binary -t|--text -z|--zero --tag --ignore-missing --quiet --status --strict -w|--warn "+std), grammar.List(grammar.O("-l|--length="),
		grammar.O("-c|--check").DenyWith("reads and hashes the files named in a list (the names are not checked)")))})
	toolspec.Reg("cmp", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-b|--print-bytes -l|--verbose -s|--quiet|--silent --help -v|--version"), grammar.List(grammar.O("-i|--ignore-initial="), grammar.O("-n|--bytes=")))})
	toolspec.Reg("comm", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-1 -2 -3 --check-order --nocheck-order --total -z|--zero-terminated "+std), grammar.List(grammar.O("--output-delimiter=")))})
	toolspec.Reg("column", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-t|--table -x|--fillrows -J|--json -L|--keep-empty-lines -d|--table-noheadings -e|--table-header-repeat -h|--help -V|--version"),
		grammar.List(grammar.O("-s|--separator="), grammar.O("-o|--output-separator="), grammar.O("-c|--output-width="), grammar.O("-N|--table-columns="), grammar.O("-l|--table-columns-limit="), grammar.O("-R|--table-right="), grammar.O("-T|--table-truncate="), grammar.O("-E|--table-noextreme="), grammar.O("-W|--table-wrap="), grammar.O("-H|--table-hide="), grammar.O("-O|--table-order="), grammar.O("-n|--table-name="), grammar.O("-r|--tree="), grammar.O("-i|--tree-id="), grammar.O("-p|--tree-parent="), grammar.O("-C|--table-column=")))})
	// xxd INFILE OUTFILE writes OUTFILE.
	toolspec.Reg("xxd", &grammar.CmdSpec{Operand: R, HasLast: true, Last: W, LongSingleDash: true, Opts: grammar.Opts(grammar.Flags("-a|-autoskip -b|-bits -C|-capitalize -E|-EBCDIC -e -i|-include -p|-ps|-postscript|-plain -r|-revert -u -d -h|-help -v|-version"),
		grammar.List(grammar.O("-c|-cols="), grammar.O("-g|-groupsize="), grammar.O("-l|-len="), grammar.O("-o|-offset="), grammar.O("-s|-seek="), grammar.O("-n|-name=")))})
	toolspec.Reg("od", &grammar.CmdSpec{Operand: R, Opts: grammar.Opts(grammar.Flags("-b -c -d -f -i -l -o -s -x -v|--output-duplicates --traditional "+std), grammar.List(grammar.O("-A|--address-radix="), grammar.O("-j|--skip-bytes="), grammar.O("-N|--read-bytes="), grammar.O("-S|--strings?"), grammar.O("-t|--format="), grammar.O("-w|--width?"), grammar.O("--endian=")))})
	toolspec.Reg("strings", &grammar.CmdSpec{Operand: R, NumFlag: "-n", Post: noResponseFiles, Opts: grammar.Opts(grammar.Flags("-a|--all -d|--data -f|--print-file-name -w|--include-all-whitespace -h|--help -v|-V|--version"), grammar.List(grammar.O("-n|--bytes="), grammar.O("-t|--radix="), grammar.O("-e|--encoding="), grammar.O("-s|--output-separator="), grammar.O("-T|--target="), grammar.O("-U|--unicode=")))})
	toolspec.Reg("tree", &grammar.CmdSpec{Operand: R, Post: func(p *grammar.Parsed) { p.Recursive = true }, Opts: grammar.Opts(grammar.Flags("-a -d -l -f -x -q -N -Q -p -u -g -s -h -D -F -v -t -c -U -r -C -n -A -S -i --inodes --device --noreport --dirsfirst --filesfirst --si --du --prune --gitignore --metafirst --help --version --fromtabfile --nolinks -J -X"),
		grammar.List(grammar.O("-L="), grammar.O("-P="), grammar.O("-I="), grammar.O("--filelimit="), grammar.O("--timefmt="), grammar.O("--sort="), grammar.O("--charset="), grammar.O("-H="), grammar.O("-T="), grammar.O("--matchdirs"), grammar.O("--ignore-case"), grammar.O("--fromfile"), grammar.O("--infofile=", R), grammar.O("--gitfile=", R), grammar.O("--hintro=", R), grammar.O("--houtro=", R),
			grammar.O("-o=", W), grammar.O("-R").DenyWith("writes 00Tree.html into every directory it lists")))})
	// Pagers and process viewers are interactive-safe on a terminal: less
	// runs with LESSSECURE (no shell, editor, pipe or log commands, no
	// writes) and, read-only, may execute nothing else.
	toolspec.Register("more", &toolspec.ToolSpec{ExecEnv: lessSecure, Grammar: &grammar.CmdSpec{Operand: R, Interactive: true, Post: noLessCommands, Opts: grammar.Opts(grammar.Flags("-d|--silent -l|--logical -f|--no-pause -p|--print-over -c|--clean-print -s|--squeeze -u|--plain -h|--help -V|--version"), grammar.List(grammar.O("-n|--lines=")))}})
	toolspec.Reg("top", &grammar.CmdSpec{Interactive: true, Post: noOperands("top takes no operands"), Opts: grammar.Opts(grammar.Flags("-b|--batch -c|--cmdline-toggle -H|--threads-show -i|--idle-toggle -S|--accum-time-toggle -1|--single-cpu-toggle -s|--secure-mode -h|--help -V|--version"),
		grammar.List(grammar.O("-d|--delay="), grammar.O("-n|--iterations="), grammar.O("-p|--pid="), grammar.O("-u|--filter-only-euser="), grammar.O("-U|--filter-any-user="), grammar.O("-o|--sort-override="), grammar.O("-E|--scale-summary-mem="), grammar.O("-e|--scale-task-mem="), grammar.O("-w|--width?")))})
	toolspec.Reg("htop", &grammar.CmdSpec{Interactive: true, Post: noOperands("htop takes no operands"), Opts: grammar.Opts(grammar.Flags("-C|--no-color|--no-colour -t|--tree -M|--no-mouse -H|--highlight-changes --readonly -h|--help -V|--version"),
		grammar.List(grammar.O("-d|--delay="), grammar.O("-u|--user?"), grammar.O("-p|--pid="), grammar.O("-s|--sort-key="), grammar.O("-F|--filter=")))})
	toolspec.Register("less", &toolspec.ToolSpec{ExecEnv: lessSecure, Grammar: &grammar.CmdSpec{Operand: R, Interactive: true, Post: noLessCommands, Opts: grammar.Flags("-N|--LINE-NUMBERS -n|--line-numbers -S|--chop-long-lines -R|--RAW-CONTROL-CHARS -r|--raw-control-chars -F|--quit-if-one-screen -X|--no-init -i|--ignore-case -I|--IGNORE-CASE -s|--squeeze-blank-lines -E|--QUIT-AT-EOF -e|--quit-at-eof -f|--force -q|--quiet|--silent -Q|--QUIET|--SILENT -V|--version --help")}})
	toolspec.Reg("jq", &grammar.CmdSpec{Custom: parseJq})
	toolspec.Reg("ps", &grammar.CmdSpec{Custom: parsePs})
	toolspec.Reg("lsof", &grammar.CmdSpec{Custom: parseLsof})
}

// noOperands refuses operands (hostname NAME would set the host name).
func noOperands(why string) func(*grammar.Parsed) {
	return func(p *grammar.Parsed) {
		if len(p.Operands) > 0 {
			p.Deny(verdict.RiskHigh, "%s", why)
		}
	}
}

// noResponseFiles refuses binutils' @FILE, which reads more options from a file.
func noResponseFiles(p *grammar.Parsed) {
	for _, op := range p.Operands {
		if strings.HasPrefix(op.Value, "@") {
			p.Deny(verdict.RiskHigh, "%s %s reads options from a file (not checked)", p.Tool, grammar.Clip(op.Value))
		}
	}
}

// noLessCommands refuses less's +COMMAND operands (commands run at start).
func noLessCommands(p *grammar.Parsed) {
	for _, op := range p.Operands {
		if strings.HasPrefix(op.Value, "+") {
			p.Deny(verdict.RiskHigh, "less %s runs a less command at start (a less command can run programs)", grammar.Clip(op.Value))
		}
	}
}

// jqFlags are jq's options without values; short ones may be bundled (-rc).
var jqFlags = grammar.Set("-r --raw-output -j --join-output -c --compact-output -s --slurp -n --null-input -e --exit-status -S --sort-keys -C --color-output -M --monochrome-output -a --ascii-output --tab --seq --stream --stream-errors -R --raw-input --raw-output0 --unbuffered -h --help -V --version --build-configuration")

// parseJq reads jq [OPTIONS] FILTER [FILES...]. jq cannot run programs or
// write files; what it reads is its operands, --slurpfile/--rawfile files,
// and modules (import/include, -L, -f), which are refused as unchecked.
func parseJq(p *grammar.Parsed, args []string) error {
	filter, positional := false, false
	use := func(name string) {
		p.Opts = append(p.Opts, grammar.OptUse{Opt: &grammar.Opt{Names: []string{name}}, Name: name})
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			positional = filter // after the filter, -- ends options; the rest are files
			for _, rest := range args[i+1:] {
				if !filter {
					filter = true
					p.Operands = append(p.Operands, jqFilter(p, rest))
					continue
				}
				p.Operands = append(p.Operands, grammar.Operand{Value: rest, Kind: map[bool]grammar.Kind{true: grammar.KOther, false: grammar.KPathRead}[positional]})
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
				return grammar.Errf("%s needs a name and a value", a)
			}
			i += 2
		case a == "--slurpfile" || a == "--rawfile":
			use(a)
			if i+2 >= len(args) {
				return grammar.Errf("%s needs a name and a file", a)
			}
			p.Paths = append(p.Paths, grammar.Operand{Value: args[i+2], Kind: grammar.KPathRead})
			i += 2
		case a == "-f" || a == "--from-file" || strings.HasPrefix(a, "--from-file="):
			use("-f")
			p.Deny(verdict.RiskHigh, "jq -f reads a jq program from a file (%s)", toolspec.WhyUnchecked)
			return nil
		case a == "-L" || strings.HasPrefix(a, "-L") || strings.HasPrefix(a, "--library-path"):
			use("-L")
			p.Deny(verdict.RiskHigh, "jq -L loads modules and data files from a directory (not checked)")
			return nil
		case strings.HasPrefix(a, "--"):
			return grammar.Errf("unknown option %s", grammar.Clip(a))
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for _, c := range a[1:] {
				if !jqFlags["-"+string(c)] {
					return grammar.Errf("unknown option %s", grammar.Clip(a))
				}
			}
			use(a)
		case !filter:
			filter = true
			p.Operands = append(p.Operands, jqFilter(p, a))
		default:
			p.Operands = append(p.Operands, grammar.Operand{Value: a, Kind: map[bool]grammar.Kind{true: grammar.KOther, false: grammar.KPathRead}[positional]})
		}
	}
	return nil
}

var jqModuleRE = regexp.MustCompile(`\b(import|include)\b|\bmodulemeta\b|\bget_search_list\b`)

// jqFilter is the filter operand; module directives are refused (they read
// files named inside the filter).
func jqFilter(p *grammar.Parsed, f string) grammar.Operand {
	if jqModuleRE.MatchString(f) {
		p.Deny(verdict.RiskHigh, "jq import/include loads modules and data files that are not checked")
	}
	return grammar.Operand{Value: f, Kind: grammar.KOther}
}

// parsePs reads ps's three option styles as data, refusing what shows other
// processes' environments (secrets: API keys, tokens): the BSD e option and
// any format naming env/environ (in whatever spelling: -o, -eo, o, --format).
func parsePs(p *grammar.Parsed, args []string) error {
	for _, a := range args {
		p.Operands = append(p.Operands, grammar.Operand{Value: a, Kind: grammar.KOther})
		if strings.Contains(strings.ToLower(a), "env") {
			p.Deny(verdict.RiskHigh, "ps %s shows other processes' environments (they hold secrets)", grammar.Clip(a))
		}
		if !strings.HasPrefix(a, "-") && strings.ContainsRune(a, 'e') && isPsBSDWord(a) {
			p.Deny(verdict.RiskHigh, "ps %s: the BSD e option shows other processes' environments (they hold secrets)", grammar.Clip(a))
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
func parseLsof(p *grammar.Parsed, args []string) error {
	for _, a := range args {
		if strings.HasPrefix(a, "-D") {
			p.Deny(verdict.RiskHigh, "lsof -D reads or writes a device cache file")
		}
		p.Operands = append(p.Operands, grammar.Operand{Value: a, Kind: grammar.KOther})
	}
	return nil
}
