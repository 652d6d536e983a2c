package policy

import (
	"path/filepath"
	"regexp"
	"strings"
)

// Tool grammars. The grammar says how argv is read (which options exist,
// which take values, which operands are paths) and which options are
// hidden execution; whether a command is allowed, asked or denied, and at
// which risk, is data in the policy file (rules).

func opts(groups ...[]*opt) []*opt {
	var out []*opt
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func list(os ...*opt) []*opt { return os }

func sub(name string, c *cmdSpec) *cmdSpec { c.name = name; return c }

func subs(cs ...*cmdSpec) map[string]*cmdSpec {
	m := map[string]*cmdSpec{}
	for _, c := range cs {
		m[c.name] = c
	}
	return m
}

const (
	whyExec      = "runs a command (hidden execution)"
	whyPager     = "runs a pager program"
	whyConfig    = "sets configuration that can run programs"
	whyUnchecked = "reads a program text that cannot be checked"
)

func registerFileTools() {
	R, W := KPathRead, KPathWrite
	reg("ls", &cmdSpec{operand: R, post: func(p *parsed) { p.recursive = p.has("-R") }, opts: opts(flags("-a|--all -A|--almost-all -l -h|--human-readable -R|--recursive -t -S -r|--reverse -1 -d|--directory -F -i|--inode -s|--size -G|--no-group -n|--numeric-uid-gid -X -U -v -c -u -g -o -p -m -x -C -L|--dereference -H|--dereference-command-line -k|--kibibytes -Q|--quote-name -N|--literal -b|--escape -q|--hide-control-chars -f -B|--ignore-backups -Z|--context -D|--dired --si --author --full-time --group-directories-first --file-type --show-control-chars"),
		list(o("--color?"), o("--classify?"), o("--hyperlink?"), o("--time-style="), o("--sort="), o("--time="), o("-I|--ignore="), o("--hide="), o("-w|--width="), o("--block-size="), o("--indicator-style="), o("--format="), o("--quoting-style="), o("-T|--tabsize="), o("--help"), o("--version")))})
	reg("cat", &cmdSpec{operand: R, opts: flags("-A|--show-all -b|--number-nonblank -e -E|--show-ends -n|--number -s|--squeeze-blank -t -T|--show-tabs -u -v|--show-nonprinting --help --version")})
	headOpts := list(o("-n|--lines="), o("-c|--bytes="), o("-q|--quiet|--silent"), o("-v|--verbose"), o("-z|--zero-terminated"), o("--help"), o("--version"))
	reg("head", &cmdSpec{operand: R, numFlag: "-n", opts: headOpts})
	reg("tail", &cmdSpec{operand: R, numFlag: "-n", opts: opts(headOpts, list(o("-f"), o("--follow?"), o("-F"), o("--retry"), o("-s|--sleep-interval="), o("--pid="), o("--max-unchanged-stats=")))})
	reg("wc", &cmdSpec{operand: R, opts: opts(flags("-c|--bytes -m|--chars -l|--lines -w|--words -L|--max-line-length --help --version"), list(o("--files0-from=", R), o("--total=")))})
	reg("stat", &cmdSpec{operand: R, opts: opts(flags("-L|--dereference -f|--file-system -t|--terse --help --version"), list(o("-c|--format="), o("--printf="), o("--cached=")))})
	reg("file", &cmdSpec{operand: R, opts: opts(flags("-b|--brief -i|--mime --mime-type --mime-encoding -L|--dereference -h|--no-dereference -z|--uncompress -Z|--uncompress-noreport -k|--keep-going -s|--special-files -N|--no-pad -0|--print0 -r|--raw -E -l|--list --extension --apple -p|--preserve-date --help -v|--version"),
		list(o("-m|--magic-file=", R), o("-f|--files-from=", R), o("-F|--separator="), o("-e|--exclude="), o("-P|--parameter="), o("-S|--no-sandbox").denyWith("disables the seccomp sandbox")))})
	reg("du", &cmdSpec{operand: R, opts: opts(flags("-a|--all -h|--human-readable -s|--summarize -c|--total -k -m -b|--bytes -x|--one-file-system -L|--dereference -P|--no-dereference -H|--dereference-args -D -0|--null -l|--count-links -S|--separate-dirs --si --apparent-size --inodes --help --version"),
		list(o("-d|--max-depth="), o("--exclude="), o("-X|--exclude-from=", R), o("-t|--threshold="), o("--time?"), o("--time-style="), o("-B|--block-size="), o("--files0-from=", R)))})
	reg("df", &cmdSpec{operand: R, opts: opts(flags("-h|--human-readable -H|--si -a|--all -i|--inodes -k -l|--local -P|--portability -T|--print-type --total --sync --no-sync --help --version"), list(o("-t|--type="), o("-x|--exclude-type="), o("--output?"), o("-B|--block-size=")))})
	reg("pwd", &cmdSpec{opts: flags("-L|--logical -P|--physical --help --version")})
	grepOpts := opts(flags("-E|--extended-regexp -F|--fixed-strings -G|--basic-regexp -P|--perl-regexp -i|-y|--ignore-case --no-ignore-case -v|--invert-match -w|--word-regexp -x|--line-regexp -c|--count -l|--files-with-matches -L|--files-without-match -n|--line-number -h|--no-filename -H|--with-filename -o|--only-matching -q|--quiet|--silent -s|--no-messages -r|--recursive -R|--dereference-recursive -a|--text -I -U|--binary -z|--null-data -Z|--null -b|--byte-offset -T|--initial-tab --line-buffered --help -V|--version"),
		list(o("--color?"), o("--colour?"), o("-e|--regexp=", KPattern), o("-f|--file=", R), o("-m|--max-count="), o("-A|--after-context="), o("-B|--before-context="), o("-C|--context="), o("--include="), o("--exclude="), o("--exclude-dir="), o("--exclude-from=", R), o("--label="), o("--binary-files="), o("-D|--devices="), o("-d|--directories=")))
	reg("grep|egrep|fgrep", &cmdSpec{operand: R, opts: grepOpts, post: postPatternFirst("-e", "-f")})
	reg("rg", &cmdSpec{operand: R, post: postRg, opts: opts(flags("-i|--ignore-case -S|--smart-case -s|--case-sensitive -w|--word-regexp -x|--line-regexp -v|--invert-match -F|--fixed-strings -c|--count --count-matches -l|--files-with-matches --files-without-match --files -n|--line-number -N|--no-line-number -H|--with-filename -I|--no-filename -o|--only-matching -q|--quiet --type-list -u|--unrestricted --hidden --no-hidden --no-ignore --no-ignore-vcs --no-ignore-parent --no-ignore-dot --no-ignore-global --no-ignore-exclude --no-ignore-files -L|--follow --json --vimgrep --column --no-heading --heading -p|--pretty --max-columns-preview -U|--multiline --multiline-dotall -P|--pcre2 -z|--search-zip -a|--text --binary --trim -0|--null --null-data --stats --debug --trace --no-messages --no-config --crlf --passthru --line-buffered --block-buffered -b|--byte-offset --one-file-system --no-unicode --include-zero --mmap --no-mmap -h|--help -V|--version --sort-files --glob-case-insensitive --ignore-file-case-insensitive"),
		list(o("-e|--regexp=", KPattern), o("-f|--file=", R), o("-r|--replace="), o("-g|--glob=", KPattern), o("--iglob=", KPattern), o("-t|--type="), o("-T|--type-not="), o("--type-add="), o("--type-clear="), o("--ignore-file=", R), o("-d|--max-depth|--maxdepth="), o("-m|--max-count="), o("-A|--after-context="), o("-B|--before-context="), o("-C|--context="), o("--context-separator="), o("--color="), o("--colors="), o("--sort="), o("--sortr="), o("-j|--threads="), o("-M|--max-columns="), o("--max-filesize="), o("--engine="), o("-E|--encoding="), o("--field-match-separator="), o("--field-context-separator="), o("--path-separator="), o("--hyperlink-format="), o("--generate="), o("--pre-glob=", KPattern),
			o("--pre=").denyWith("runs a preprocessor program on every file"), o("--hostname-bin=").denyWith("runs a program to get the host name")))})
	reg("sort", &cmdSpec{operand: R, opts: opts(flags("-b|--ignore-leading-blanks -d|--dictionary-order -f|--ignore-case -g|--general-numeric-sort -i|--ignore-nonprinting -M|--month-sort -h|--human-numeric-sort -n|--numeric-sort -R|--random-sort -r|--reverse -V|--version-sort -c -C -m|--merge -s|--stable -u|--unique -z|--zero-terminated --debug --help --version"),
		list(o("--check?"), o("-k|--key="), o("-t|--field-separator="), o("-o|--output=", W), o("-S|--buffer-size="), o("-T|--temporary-directory=", W), o("--parallel="), o("--files0-from=", R).denyWith("reads and prints the files named in a list (the names are not checked)"), o("--random-source=", R), o("--sort="), o("--batch-size="), o("--compress-program=").denyWith(whyExec)))})
	reg("uniq", &cmdSpec{operand: R, hasLast: true, last: W, opts: opts(flags("-c|--count -d|--repeated -D -u|--unique -i|--ignore-case -z|--zero-terminated --help --version"), list(o("--all-repeated?"), o("--group?"), o("-f|--skip-fields="), o("-s|--skip-chars="), o("-w|--check-chars=")))})
	reg("cut", &cmdSpec{operand: R, opts: opts(flags("-s|--only-delimited -n --complement -z|--zero-terminated --help --version"), list(o("-b|--bytes="), o("-c|--characters="), o("-f|--fields="), o("-d|--delimiter="), o("--output-delimiter=")))})
	reg("tr", &cmdSpec{operand: KOther, opts: flags("-c|-C|--complement -d|--delete -s|--squeeze-repeats -t|--truncate-set1 --help --version")})
	reg("diff", &cmdSpec{operand: R, post: func(p *parsed) { p.recursive = p.has("-r") }, opts: opts(flags("-u -c -q|--brief -r|--recursive -N|--new-file -i|--ignore-case -w|--ignore-all-space -b|--ignore-space-change -B|--ignore-blank-lines -E|--ignore-tab-expansion -Z|--ignore-trailing-space -a|--text -y|--side-by-side -p|--show-c-function -s|--report-identical-files --strip-trailing-cr -t|--expand-tabs -T|--initial-tab --suppress-common-lines -l|--paginate --no-dereference -d|--minimal --speed-large-files --normal -e|--ed -n|--rcs --ignore-file-name-case --no-ignore-file-name-case --unidirectional-new-file --left-column --suppress-blank-empty --help -v|--version"),
		list(o("-U|--unified?"), o("-C|--context?"), o("--color?"), o("-W|--width="), o("-F|--show-function-line="), o("--label="), o("-x|--exclude="), o("-X|--exclude-from=", R), o("-S|--starting-file="), o("--from-file=", R), o("--to-file=", R), o("-I|--ignore-matching-lines="), o("--horizon-lines="), o("-D|--ifdef="), o("--tabsize="), o("--line-format="), o("--old-line-format="), o("--new-line-format="), o("--unchanged-line-format="), o("--old-group-format="), o("--new-group-format="), o("--changed-group-format="), o("--unchanged-group-format="), o("--palette=")))})
	reg("sed", &cmdSpec{operand: R, post: postSed, opts: opts(flags("-n|--quiet|--silent -E|-r|--regexp-extended -s|--separate -u|--unbuffered -z|--null-data --posix --debug --sandbox --follow-symlinks -b|--binary --help --version"),
		list(o("-e|--expression="), o("-f|--file=").denyWith(whyUnchecked+" (sed script file)"), o("-i|--in-place?").writes(), o("-l|--line-length=")))})
	reg("awk|mawk|gawk|nawk|original-awk", &cmdSpec{operand: R, posix: true, post: postAwk, opts: list(o("-F="), o("-v="), o("-f=").denyWith(whyUnchecked+" (awk program file)"), o("-W=").denyWith("mawk -W options are not checked"), o("--version"))})
	reg("cp", &cmdSpec{operand: R, hasLast: true, last: W, write: true, post: postCopy, opts: opts(flags("-a|--archive -b -d -f|--force -i|--interactive -H -l|--link -L|--dereference -n|--no-clobber -P|--no-dereference -p --parents -R|-r|--recursive --remove-destination --strip-trailing-slashes -s|--symbolic-link -T|--no-target-directory -u -v|--verbose -x|--one-file-system -Z --attributes-only --copy-contents --debug --keep-directory-symlink --help --version"),
		list(o("--backup?"), o("--preserve?"), o("--no-preserve="), o("--reflink?"), o("--sparse="), o("-S|--suffix="), o("-t|--target-directory=", W), o("--update?"), o("--context?")))})
	reg("mv", &cmdSpec{operand: W, write: true, post: postCopy, opts: opts(flags("-b -f|--force -i|--interactive -n|--no-clobber --strip-trailing-slashes -T|--no-target-directory -u -v|--verbose -Z|--context --exchange --no-copy --debug --help --version"), list(o("--backup?"), o("-S|--suffix="), o("-t|--target-directory=", W), o("--update?")))})
	reg("rm", &cmdSpec{operand: W, write: true, post: postRm, opts: opts(flags("-f|--force -i -I -r|-R|--recursive -d|--dir -v|--verbose --one-file-system --preserve-root --help --version"), list(o("--interactive?"), o("--no-preserve-root").denyWith("removes / recursively")))})
	reg("rmdir", &cmdSpec{operand: W, write: true, post: postRm, opts: flags("-p|--parents -v|--verbose --ignore-fail-on-non-empty --help --version")})
	reg("mkdir", &cmdSpec{operand: W, write: true, post: postMkdir, opts: opts(flags("-p|--parents -v|--verbose -Z --help --version"), list(o("-m|--mode="), o("--context?")))})
	reg("touch", &cmdSpec{operand: W, write: true, opts: opts(flags("-a -c|--no-create -m -h|--no-dereference -f --help --version"), list(o("-d|--date="), o("-t="), o("-r|--reference=", R), o("--time=")))})
	reg("ln", &cmdSpec{operand: KOther, hasLast: true, last: W, write: true, post: postLn, opts: opts(flags("-b -d|-F|--directory -f|--force -i|--interactive -L|--logical -n|--no-dereference -P|--physical -r|--relative -s|--symbolic -T|--no-target-directory -v|--verbose --help --version"), list(o("--backup?"), o("-S|--suffix="), o("-t|--target-directory=", W)))})
	reg("chmod", &cmdSpec{operandLike: chmodModeRE.MatchString, operand: W, hasFirst: true, first: KOther, write: true, post: postChmod, opts: opts(flags("-c|--changes -f|--silent|--quiet -v|--verbose -R|--recursive --preserve-root --dereference -h|--no-dereference --help --version"), list(o("--reference=", R), o("--no-preserve-root").denyWith("changes / recursively")))})
	reg("sleep", &cmdSpec{opts: flags("--help --version")})
	reg("date", &cmdSpec{post: postDate, opts: opts(flags("-R|--rfc-email -u|--utc|--universal --debug --help --version"), list(o("-d|--date="), o("-f|--file=", R), o("-I|--iso-8601?"), o("--rfc-3339="), o("-r|--reference=", R), o("-s|--set=").denyWith("sets the system clock")))})
	reg("env", &cmdSpec{posix: true, opts: opts(flags("-i|--ignore-environment -0|--null -v|--debug --help --version"), list(o("-u|--unset="), o("-C|--chdir=", R), o("-S|--split-string=").denyWith("splits a string into a command"), o("--default-signal?"), o("--ignore-signal?"), o("--block-signal?"), o("--list-signal-handling")))})
	// Free-form tools: every argument is data.
	for _, n := range []string{"echo", "printf", "true", "false", "yes"} {
		reg(n, &cmdSpec{free: true})
	}
}

func postPatternFirst(e, f string) func(*parsed) {
	return func(p *parsed) {
		p.recursive = p.has("-r", "-R") || contains(p.values("-d"), "recurse")
		if !p.has(e, f) && len(p.operands) > 0 {
			p.operands[0].kind = KPattern
		}
	}
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

// setBackup records the name cp/mv/ln give the destination they replace
// (-b, --backup, -S): "DEST~", or DEST+SUFFIX, which may be a protected name
// ("cp -b -S t a .gi" makes ".git"). Numbered backups end in "~".
func setBackup(p *parsed) {
	if !p.has("-b", "--backup", "-S") {
		return
	}
	p.backupSuffix = "~"
	if v := p.values("-S"); len(v) > 0 && v[len(v)-1] != "" {
		p.backupSuffix = v[len(v)-1]
	}
}

func postCopy(p *parsed) {
	p.recursive = p.has("-R", "-a")
	setBackup(p)
	// cp --parents writes DIR/SOURCE (the whole path given), not DIR/basename.
	p.keepParents = p.tool == "cp" && p.has("--parents")
	if p.tool == "cp" && p.has("-l") {
		// hard links share inodes with the sources: check them as writes
		for i := range p.operands {
			p.operands[i].kind = KPathWrite
		}
	}
	if p.has("-t") {
		for i := range p.operands {
			if p.tool == "cp" && !p.has("-l") {
				p.operands[i].kind = KPathRead
			} else {
				p.operands[i].kind = KPathWrite
			}
		}
		addTargetDirWrites(p)
		return
	}
	if len(p.operands) == 1 {
		p.deny(RiskLow, "%s: missing destination operand", p.tool)
	}
	p.copyInto = !p.has("-T")
}

func postLn(p *parsed) {
	hard := !p.has("-s")
	setBackup(p)
	defer func() {
		// A hard link shares the inode: writing the link later writes the
		// target, so a hard link target is checked like a write.
		if hard {
			for i := range p.operands {
				if p.operands[i].kind == KOther {
					p.operands[i].kind = KPathWrite
				}
			}
		}
	}()
	if p.has("-t") {
		for i := range p.operands {
			p.operands[i].kind = KOther
		}
		addTargetDirWrites(p)
		return
	}
	if len(p.operands) == 1 {
		// ln TARGET: creates ./basename(TARGET)
		p.operands = append(p.operands, operand{value: baseName(p.operands[0].value), kind: KPathWrite})
	}
	p.copyInto = !p.has("-T")
}

// addTargetDirWrites: with -t DIR, cp/mv/ln write DIR/basename(SOURCE).
func addTargetDirWrites(p *parsed) {
	for _, dir := range p.values("-t") {
		for _, op := range p.operands {
			p.paths = append(p.paths, operand{value: strings.TrimRight(dir, "/") + "/" + p.intoName(op.value), kind: KPathWrite})
		}
	}
}

// intoName is the name a source gets inside a destination directory.
func (p *parsed) intoName(src string) string {
	if p.keepParents {
		return src
	}
	return baseName(src)
}

// setIDMode reports whether a chmod/mkdir mode sets the setuid or setgid bit.
func setIDMode(m string) bool {
	if isOctal(m) {
		var v int
		for _, c := range m {
			v = v*8 + int(c-'0')
		}
		return v&0o6000 != 0
	}
	for _, clause := range strings.Split(m, ",") {
		i := strings.IndexAny(clause, "+=")
		if i < 0 {
			continue
		}
		if strings.ContainsRune(clause[i:], 's') {
			return true
		}
		// GNU chmod also takes an operator with an octal number: "=4755",
		// "+6000", "u+rwx,+4000".
		if num := strings.TrimLeft(clause[i:], "+-="); isOctal(num) && setIDMode(num) {
			return true
		}
	}
	return false
}

func isOctal(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '7' {
			return false
		}
	}
	return true
}

func baseName(s string) string {
	s = strings.TrimRight(s, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "."
	}
	return s
}

var chmodModeRE = regexp.MustCompile(`^([ugoa]*[-+=][rwxXstugo]*)(,[ugoa]*[-+=][rwxXstugo]*)*$|^[0-7]{1,4}$`)

func postChmod(p *parsed) {
	if p.has("--reference") {
		if len(p.operands) > 0 {
			p.operands[0].kind = KPathWrite
		}
		return // the reference file's setuid/setgid bits are checked when deciding
	}
	if len(p.operands) > 0 && setIDMode(p.operands[0].value) {
		p.deny(RiskCritical, "chmod %s: setuid/setgid bits make a file run with its owner's privileges (termd runs as root)", clip(p.operands[0].value))
	}
}

func postMkdir(p *parsed) {
	for _, m := range p.values("-m") {
		if setIDMode(m) {
			p.deny(RiskHigh, "mkdir -m %s: setuid/setgid bits are not allowed", clip(m))
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

func postRm(p *parsed) {
	for _, op := range p.operands {
		v := op.value
		b := strings.TrimRight(v, "/")
		if v == "" {
			continue
		}
		if b == "" || b == "." || b == ".." || v == "*" || v == "~" || strings.HasSuffix(b, "/.") || strings.HasSuffix(b, "/..") || b == "/*" || strings.HasSuffix(b, "/*") {
			p.deny(RiskCritical, "%s: removing %q would remove the workspace itself", p.tool, clip(v))
		}
	}
	if p.tool == "rmdir" && p.has("-p") {
		// rmdir -p a/b/c also removes a/b and a (and so on up to what is
		// named): each is a removal.
		for _, op := range append([]operand(nil), p.operands...) {
			for d := filepath.Dir(strings.TrimRight(op.value, "/")); d != "." && d != "/" && d != ""; d = filepath.Dir(d) {
				p.operands = append(p.operands, operand{value: d, kind: KPathWrite})
			}
		}
	}
}
