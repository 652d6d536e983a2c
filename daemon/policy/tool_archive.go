package policy

import "strings"

var _ = family(registerArchive)

// registerArchive: tar (old-style bundles read as options) and gzip.
func registerArchive() {
	R, W := KPathRead, KPathWrite
	register("tar", &toolSpec{preparse: tarOldStyle, grammar: &cmdSpec{operand: R, post: postTar, opts: opts(flags("-c|--create -x|--extract|--get -t|--list -r|--append -u|--update -A|--catenate|--concatenate -d|--diff|--compare --delete -v|--verbose -z|--gzip|--gunzip|--ungzip -j|--bzip2 -J|--xz --zstd --lzma --lzip -a|--auto-compress -p|--preserve-permissions|--same-permissions -k|--keep-old-files --keep-newer-files --skip-old-files -O|--to-stdout -h|--dereference --no-same-owner --same-owner --no-same-permissions --overwrite --overwrite-dir -m|--touch -S|--sparse -W|--verify --wildcards --no-wildcards --anchored --no-anchored --totals --force-local --one-file-system -l|--check-links --numeric-owner --no-recursion --recursion --ignore-case --null --no-null --unlink-first -U --recursive-unlink -i|--ignore-zeros --full-time -w|--interactive -B|--read-full-records -G|--incremental --show-transformed-names --show-stored-names --utc --xattrs --no-xattrs --acls --no-acls --selinux --no-selinux --help --version --checkpoint --exclude-vcs --exclude-vcs-ignores --exclude-backups --exclude-caches --no-auto-compress -s|--preserve-order|--same-order --remove-files -P|--absolute-names"),
		list(o("-f|--file="), o("-C|--directory="), o("--exclude="), o("-T|--files-from=", R), o("-X|--exclude-from=", R), o("--strip-components="), o("--owner="), o("--group="), o("--mode="), o("--mtime="), o("--sort="), o("--transform|--xform="), o("--warning="), o("--format|-H="), o("--blocking-factor|-b="), o("--record-size="), o("--newer|-N="), o("--newer-mtime="), o("--label|-V="), o("--occurrence?"), o("--quoting-style="), o("--atime-preserve?"), o("--index-file=", W), o("--hole-detection="), o("--tape-length|-L="),
			o("-I|--use-compress-program=").denyWith(whyExec), o("--to-command=").denyWith(whyExec), o("--checkpoint-action=").denyWith(whyExec), o("-F|--info-script|--new-volume-script=").denyWith(whyExec), o("--rsh-command=").denyWith(whyExec), o("--rmt-command=").denyWith(whyExec), o("-M|--multi-volume").denyWith("multi-volume archives run volume scripts")))}})
	reg("gzip|gunzip|zcat", &cmdSpec{operand: R, post: postGzip, opts: opts(flags("-c|--stdout|--to-stdout -d|--decompress|--uncompress -f|--force -k|--keep -l|--list -n|--no-name -N|--name -q|--quiet -r|--recursive -t|--test -v|--verbose -1|--fast -2 -3 -4 -5 -6 -7 -8 -9|--best --rsyncable --synchronous -h|--help -V|--version"), list(o("-S|--suffix=")))})
}

// tarOldStyle rewrites "tar xzf a.tgz" into "-x -z -f a.tgz".
// Letters that take a value are those whose short option takes one in tar's
// grammar, so the two cannot disagree ("tar tHf posix ARCHIVE").
func tarOldStyle(spec *cmdSpec, args []string) []string {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return args
	}
	takesValue := func(c byte) bool {
		op, ok := spec.optIndex["-"+string(c)]
		return ok && op.arg == reqArg
	}
	letters := args[0]
	rest := args[1:]
	var out []string
	for j := 0; j < len(letters); j++ {
		c := letters[j]
		out = append(out, "-"+string(c))
		if takesValue(c) && len(rest) > 0 {
			out = append(out, rest[0])
			rest = rest[1:]
		}
	}
	return append(out, rest...)
}

// tarDirs are the directories tar's -C options move to: each -C is relative
// to the previous one ("-C d -C x" is d/x), as tar applies them in turn.
func tarDirs(p *parsed) []string {
	var out []string
	cur := ""
	for _, d := range p.values("-C") {
		if cur == "" || strings.HasPrefix(d, "/") {
			cur = d
		} else {
			cur = strings.TrimRight(cur, "/") + "/" + d
		}
		out = append(out, cur)
	}
	return out
}

func postTar(p *parsed) {
	create := p.has("-c", "-r", "-u", "-A")
	p.recursive = create && !p.has("--no-recursion")
	extract := p.has("-x")
	if !create && !extract && !p.has("-t", "-d", "--delete") {
		p.deny(RiskLow, "tar: no operation (-c, -x, -t)")
	}
	if p.has("-P") && extract {
		p.deny(RiskCritical, "tar -P: extracting absolute names writes outside the workspace")
	}
	for _, f := range p.values("-f") {
		if strings.Contains(f, ":") && !p.has("--force-local") {
			p.deny(RiskCritical, "tar -f %q: a host:path archive runs a remote shell", clip(f))
		}
		kind := KPathRead
		if create || p.has("--delete") {
			kind = KPathWrite
		}
		if f != "-" {
			p.paths = append(p.paths, operand{value: f, kind: kind})
		}
	}
	if p.has("-T") && create {
		p.ask(RiskHigh, "tar -T: the names in the file list are not inspected")
	}
	if p.has("-h") && create {
		p.ask(RiskHigh, "tar -h: symlinks inside the archived trees are followed and not inspected")
	}
	if p.has("--remove-files") {
		for i := range p.operands {
			p.operands[i].kind = KPathWrite
		}
	}
	if extract {
		p.write = true
		dirs := tarDirs(p)
		if len(dirs) == 0 {
			dirs = []string{"."}
		}
		for _, d := range dirs {
			p.paths = append(p.paths, operand{value: d, kind: KPathWrite})
		}
		for i := range p.operands {
			p.operands[i].kind = KOther // member names
		}
		if !p.has("-O") {
			p.ask(RiskHigh, "tar -x: archive contents are not inspected; extraction may write any file under the target directory")
		}
	} else {
		for _, d := range tarDirs(p) {
			p.paths = append(p.paths, operand{value: d, kind: KPathRead})
			// members named after -C DIR are read relative to DIR
			for _, op := range p.operands {
				if !strings.HasPrefix(op.value, "/") {
					p.paths = append(p.paths, operand{value: strings.TrimRight(d, "/") + "/" + op.value, kind: KPathRead})
				}
			}
		}
	}
	if create || p.has("--delete") {
		p.write = true
	}
}

func postGzip(p *parsed) {
	if p.tool == "zcat" || p.has("-c", "-l", "-t") {
		return
	}
	p.write = true
	suffix := ".gz"
	if v := p.values("-S"); len(v) > 0 {
		suffix = v[len(v)-1]
	}
	decompress := p.tool == "gunzip" || p.has("-d")
	if decompress && p.has("-N") {
		p.deny(RiskHigh, "%s -N: restores the file name stored in the archive, which is not checked (it could be .bashrc or .git)", p.tool)
	}
	for i := range p.operands {
		p.operands[i].kind = KPathWrite
		// The output file is a write too: FILE+SUFFIX when compressing,
		// FILE without its suffix when decompressing.
		f := p.operands[i].value
		if f == "-" {
			continue
		}
		out := f + suffix
		if decompress {
			out = gunzipName(f, suffix)
		}
		if out != "" {
			p.paths = append(p.paths, operand{value: out, kind: KPathWrite})
		}
	}
}

// gunzipName is the file gunzip writes for f ("" when it would refuse).
func gunzipName(f, suffix string) string {
	lower := strings.ToLower(f)
	for _, s := range []string{strings.ToLower(suffix), ".gz", "-gz", ".z", "-z", "_z"} {
		if s != "" && strings.HasSuffix(lower, s) && len(f) > len(s) {
			return f[:len(f)-len(s)]
		}
	}
	for _, s := range []string{".tgz", ".taz"} {
		if strings.HasSuffix(lower, s) && len(f) > len(s) {
			return f[:len(f)-len(s)] + ".tar"
		}
	}
	return f // unknown suffix: gunzip refuses; check the name itself
}
