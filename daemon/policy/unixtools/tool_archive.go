package unixtools

import (
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

var _ = toolspec.Family(registerArchive)

// registerArchive: tar (old-style bundles read as options) and gzip.
func registerArchive() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	toolspec.Register("tar", &toolspec.ToolSpec{Preparse: tarOldStyle, Grammar: &grammar.CmdSpec{Operand: R, Post: postTar, Opts: grammar.Opts(grammar.Flags("-c|--create -x|--extract|--get -t|--list -r|--append -u|--update -A|--catenate|--concatenate -d|--diff|--compare --delete -v|--verbose -z|--gzip|--gunzip|--ungzip -j|--bzip2 -J|--xz --zstd --lzma --lzip -a|--auto-compress -p|--preserve-permissions|--same-permissions -k|--keep-old-files --keep-newer-files --skip-old-files -O|--to-stdout -h|--dereference --no-same-owner --same-owner --no-same-permissions --overwrite --overwrite-dir -m|--touch -S|--sparse -W|--verify --wildcards --no-wildcards --anchored --no-anchored --totals --force-local --one-file-system -l|--check-links --numeric-owner --no-recursion --recursion --ignore-case --null --no-null --unlink-first -U --recursive-unlink -i|--ignore-zeros --full-time -w|--interactive -B|--read-full-records -G|--incremental --show-transformed-names --show-stored-names --utc --xattrs --no-xattrs --acls --no-acls --selinux --no-selinux --help --version --checkpoint --exclude-vcs --exclude-vcs-ignores --exclude-backups --exclude-caches --no-auto-compress -s|--preserve-order|--same-order --remove-files -P|--absolute-names"),
		grammar.List(grammar.O("-f|--file="), grammar.O("-C|--directory="), grammar.O("--exclude="), grammar.O("-T|--files-from=", R), grammar.O("-X|--exclude-from=", R), grammar.O("--strip-components="), grammar.O("--owner="), grammar.O("--group="), grammar.O("--mode="), grammar.O("--mtime="), grammar.O("--sort="), grammar.O("--transform|--xform="), grammar.O("--warning="), grammar.O("--format|-H="), grammar.O("--blocking-factor|-b="), grammar.O("--record-size="), grammar.O("--newer|-N="), grammar.O("--newer-mtime="), grammar.O("--label|-V="), grammar.O("--occurrence?"), grammar.O("--quoting-style="), grammar.O("--atime-preserve?"), grammar.O("--index-file=", W), grammar.O("--hole-detection="), grammar.O("--tape-length|-L="),
			grammar.O("-I|--use-compress-program=").DenyWith(toolspec.WhyExec), grammar.O("--to-command=").DenyWith(toolspec.WhyExec), grammar.O("--checkpoint-action=").DenyWith(toolspec.WhyExec), grammar.O("-F|--info-script|--new-volume-script=").DenyWith(toolspec.WhyExec), grammar.O("--rsh-command=").DenyWith(toolspec.WhyExec), grammar.O("--rmt-command=").DenyWith(toolspec.WhyExec), grammar.O("-M|--multi-volume").DenyWith("multi-volume archives run volume scripts")))}})
	toolspec.Reg("gzip|gunzip|zcat", &grammar.CmdSpec{Operand: R, Post: postGzip, Opts: grammar.Opts(grammar.Flags("-c|--stdout|--to-stdout -d|--decompress|--uncompress -f|--force -k|--keep -l|--list -n|--no-name -N|--name -q|--quiet -r|--recursive -t|--test -v|--verbose -1|--fast -2 -3 -4 -5 -6 -7 -8 -9|--best --rsyncable --synchronous -h|--help -V|--version"), grammar.List(grammar.O("-S|--suffix=")))})
}

// tarOldStyle rewrites "tar xzf a.tgz" into "-x -z -f a.tgz".
// Letters that take a value are those whose short option takes one in tar's
// grammar, so the two cannot disagree ("tar tHf posix ARCHIVE").
func tarOldStyle(spec *grammar.CmdSpec, args []string) []string {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return args
	}
	takesValue := func(c byte) bool {
		op, ok := spec.OptIndex["-"+string(c)]
		return ok && op.Arg == grammar.ReqArg
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
func tarDirs(p *grammar.Parsed) []string {
	var out []string
	cur := ""
	for _, d := range p.Values("-C") {
		if cur == "" || strings.HasPrefix(d, "/") {
			cur = d
		} else {
			cur = strings.TrimRight(cur, "/") + "/" + d
		}
		out = append(out, cur)
	}
	return out
}

func postTar(p *grammar.Parsed) {
	create := p.Has("-c", "-r", "-u", "-A")
	p.Recursive = create && !p.Has("--no-recursion")
	extract := p.Has("-x")
	if !create && !extract && !p.Has("-t", "-d", "--delete") {
		p.Deny(verdict.RiskLow, "tar: no operation (-c, -x, -t)")
	}
	if p.Has("-P") && extract {
		p.Deny(verdict.RiskCritical, "tar -P: extracting absolute names writes outside the workspace")
	}
	for _, f := range p.Values("-f") {
		if strings.Contains(f, ":") && !p.Has("--force-local") {
			p.Deny(verdict.RiskCritical, "tar -f %q: a host:path archive runs a remote shell", grammar.Clip(f))
		}
		kind := grammar.KPathRead
		if create || p.Has("--delete") {
			kind = grammar.KPathWrite
		}
		if f != "-" {
			p.Paths = append(p.Paths, grammar.Operand{Value: f, Kind: kind})
		}
	}
	if p.Has("-T") && create {
		p.Ask(verdict.RiskHigh, "tar -T: the names in the file list are not inspected")
	}
	if p.Has("-h") && create {
		p.Ask(verdict.RiskHigh, "tar -h: symlinks inside the archived trees are followed and not inspected")
	}
	if p.Has("--remove-files") {
		for i := range p.Operands {
			p.Operands[i].Kind = grammar.KPathWrite
		}
	}
	if extract {
		p.Write = true
		dirs := tarDirs(p)
		if len(dirs) == 0 {
			dirs = []string{"."}
		}
		for _, d := range dirs {
			p.Paths = append(p.Paths, grammar.Operand{Value: d, Kind: grammar.KPathWrite})
		}
		for i := range p.Operands {
			p.Operands[i].Kind = grammar.KOther // member names
		}
		if !p.Has("-O") {
			p.Ask(verdict.RiskHigh, "tar -x: archive contents are not inspected; extraction may write any file under the target directory")
		}
	} else {
		for _, d := range tarDirs(p) {
			p.Paths = append(p.Paths, grammar.Operand{Value: d, Kind: grammar.KPathRead})
			// members named after -C DIR are read relative to DIR
			for _, op := range p.Operands {
				if !strings.HasPrefix(op.Value, "/") {
					p.Paths = append(p.Paths, grammar.Operand{Value: strings.TrimRight(d, "/") + "/" + op.Value, Kind: grammar.KPathRead})
				}
			}
		}
	}
	if create || p.Has("--delete") {
		p.Write = true
	}
}

func postGzip(p *grammar.Parsed) {
	if p.Tool == "zcat" || p.Has("-c", "-l", "-t") {
		return
	}
	p.Write = true
	suffix := ".gz"
	if v := p.Values("-S"); len(v) > 0 {
		suffix = v[len(v)-1]
	}
	decompress := p.Tool == "gunzip" || p.Has("-d")
	if decompress && p.Has("-N") {
		p.Deny(verdict.RiskHigh, "%s -N: restores the file name stored in the archive, which is not checked (it could be .bashrc or .git)", p.Tool)
	}
	for i := range p.Operands {
		p.Operands[i].Kind = grammar.KPathWrite
		// The output file is a write too: FILE+SUFFIX when compressing,
		// FILE without its suffix when decompressing.
		f := p.Operands[i].Value
		if f == "-" {
			continue
		}
		out := f + suffix
		if decompress {
			out = gunzipName(f, suffix)
		}
		if out != "" {
			p.Paths = append(p.Paths, grammar.Operand{Value: out, Kind: grammar.KPathWrite})
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
