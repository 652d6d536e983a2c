package unixtools

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

var _ = toolspec.Family(registerFiles)

// Tools that change files: cp, mv, rm, rmdir, mkdir, touch, ln, chmod.
func registerFiles() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	toolspec.Register("cp", &toolspec.ToolSpec{Check: checkCpPreserve, Grammar: &grammar.CmdSpec{Operand: R, HasLast: true, Last: W, Write: true, PlainWrite: true, Post: postCopy, Opts: grammar.Opts(grammar.Flags("-a|--archive -b -d -f|--force -i|--interactive -H -L|--dereference -n|--no-clobber -P|--no-dereference -p --parents -R|-r|--recursive --remove-destination --strip-trailing-slashes -T|--no-target-directory -u -v|--verbose -x|--one-file-system -Z --attributes-only --copy-contents --debug --keep-directory-symlink --help --version"),
		grammar.List(grammar.O("-l|--link").NotPlainWrite("makes hard links that share the sources' content"), grammar.O("-s|--symbolic-link").NotPlainWrite("makes symbolic links"), grammar.O("--backup?"), grammar.O("--preserve?"), grammar.O("--no-preserve="), grammar.O("--reflink?"), grammar.O("--sparse="), grammar.O("-S|--suffix="), grammar.O("-t|--target-directory=", W), grammar.O("--update?"), grammar.O("--context?")))}})
	toolspec.Register("mv", &toolspec.ToolSpec{Removes: true, WritesNoContent: true, Grammar: &grammar.CmdSpec{Operand: W, Write: true, PlainWrite: true, Post: postCopy, Opts: grammar.Opts(grammar.Flags("-b -f|--force -i|--interactive -n|--no-clobber --strip-trailing-slashes -T|--no-target-directory -u -v|--verbose -Z|--context --exchange --no-copy --debug --help --version"), grammar.List(grammar.O("--backup?"), grammar.O("-S|--suffix="), grammar.O("-t|--target-directory=", W), grammar.O("--update?")))}})
	toolspec.Register("rm", &toolspec.ToolSpec{Removes: true, WritesNoContent: true, Grammar: &grammar.CmdSpec{Operand: W, Write: true, Post: postRm, Opts: grammar.Opts(grammar.Flags("-f|--force -i -I -r|-R|--recursive -d|--dir -v|--verbose --one-file-system --preserve-root --help --version"), grammar.List(grammar.O("--interactive?"), grammar.O("--no-preserve-root").DenyWith("removes / recursively")))}})
	toolspec.Register("rmdir", &toolspec.ToolSpec{Removes: true, Grammar: &grammar.CmdSpec{Operand: W, Write: true, Post: postRm, Opts: grammar.Flags("-p|--parents -v|--verbose --ignore-fail-on-non-empty --help --version")}})
	toolspec.Reg("mkdir", &grammar.CmdSpec{Operand: W, Write: true, PlainWrite: true, Post: postMkdir, Opts: grammar.Opts(grammar.Flags("-p|--parents -v|--verbose -Z --help --version"), grammar.List(grammar.O("-m|--mode="), grammar.O("--context?")))})
	toolspec.Reg("touch", &grammar.CmdSpec{Operand: W, Write: true, PlainWrite: true, Opts: grammar.Opts(grammar.Flags("-a -c|--no-create -m -h|--no-dereference -f --help --version"), grammar.List(grammar.O("-d|--date="), grammar.O("-t="), grammar.O("-r|--reference=", R), grammar.O("--time=")))})
	toolspec.Reg("ln", &grammar.CmdSpec{Operand: grammar.KOther, HasLast: true, Last: W, Write: true, Post: postLn, Opts: grammar.Opts(grammar.Flags("-b -d|-F|--directory -f|--force -i|--interactive -L|--logical -n|--no-dereference -P|--physical -r|--relative -s|--symbolic -T|--no-target-directory -v|--verbose --help --version"), grammar.List(grammar.O("--backup?"), grammar.O("-S|--suffix="), grammar.O("-t|--target-directory=", W)))})
	toolspec.Register("chmod", &toolspec.ToolSpec{WritesNoContent: true, Check: checkChmodReference, Grammar: &grammar.CmdSpec{OperandLike: chmodModeRE.MatchString, Operand: W, HasFirst: true, First: grammar.KOther, Write: true, Post: postChmod, Opts: grammar.Opts(grammar.Flags("-c|--changes -f|--silent|--quiet -v|--verbose -R|--recursive --preserve-root --dereference -h|--no-dereference --help --version"), grammar.List(grammar.O("--reference=", R), grammar.O("--no-preserve-root").DenyWith("changes / recursively")))}})
}

// setBackup records the name cp/mv/ln give the destination they replace
// (-b, --backup, -S): "DEST~", or DEST+SUFFIX, which may be a protected name
// ("cp -b -S t a .gi" makes ".git"). Numbered backups end in "~".
func setBackup(p *grammar.Parsed) {
	if !p.Has("-b", "--backup", "-S") {
		return
	}
	p.BackupSuffix = "~"
	if v := p.Values("-S"); len(v) > 0 && v[len(v)-1] != "" {
		p.BackupSuffix = v[len(v)-1]
	}
}

func postCopy(p *grammar.Parsed) {
	p.Recursive = p.Has("-R", "-a")
	setBackup(p)
	// cp --parents writes DIR/SOURCE (the whole path given), not DIR/basename.
	p.KeepParents = p.Tool == "cp" && p.Has("--parents")
	if p.Tool == "cp" && p.Has("-l") {
		// hard links share inodes with the sources: check them as writes
		for i := range p.Operands {
			p.Operands[i].Kind = grammar.KPathWrite
		}
	}
	if p.Has("-t") {
		for i := range p.Operands {
			if p.Tool == "cp" && !p.Has("-l") {
				p.Operands[i].Kind = grammar.KPathRead
			} else {
				p.Operands[i].Kind = grammar.KPathWrite
			}
		}
		addTargetDirWrites(p)
		return
	}
	if len(p.Operands) == 1 {
		p.Deny(verdict.RiskLow, "%s: missing destination operand", p.Tool)
	}
	p.CopyInto = !p.Has("-T")
}

func postLn(p *grammar.Parsed) {
	hard := !p.Has("-s")
	setBackup(p)
	defer func() {
		// A hard link shares the inode: writing the link later writes the
		// target, so a hard link target is checked like a write.
		if hard {
			for i := range p.Operands {
				if p.Operands[i].Kind == grammar.KOther {
					p.Operands[i].Kind = grammar.KPathWrite
				}
			}
		}
	}()
	if p.Has("-t") {
		for i := range p.Operands {
			p.Operands[i].Kind = grammar.KOther
		}
		addTargetDirWrites(p)
		return
	}
	if len(p.Operands) == 1 {
		// ln TARGET: creates ./basename(TARGET)
		p.Operands = append(p.Operands, grammar.Operand{Value: grammar.BaseName(p.Operands[0].Value), Kind: grammar.KPathWrite})
	}
	p.CopyInto = !p.Has("-T")
}

// addTargetDirWrites: with -t DIR, cp/mv/ln write DIR/basename(SOURCE).
func addTargetDirWrites(p *grammar.Parsed) {
	for _, dir := range p.Values("-t") {
		for _, op := range p.Operands {
			p.Paths = append(p.Paths, grammar.Operand{Value: strings.TrimRight(dir, "/") + "/" + p.IntoName(op.Value), Kind: grammar.KPathWrite})
		}
	}
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

var chmodModeRE = regexp.MustCompile(`^([ugoa]*[-+=][rwxXstugo]*)(,[ugoa]*[-+=][rwxXstugo]*)*$|^[0-7]{1,4}$`)

func postChmod(p *grammar.Parsed) {
	if p.Has("--reference") {
		if len(p.Operands) > 0 {
			p.Operands[0].Kind = grammar.KPathWrite
		}
		return // the reference file's setuid/setgid bits are checked when deciding
	}
	if len(p.Operands) > 0 && setIDMode(p.Operands[0].Value) {
		p.Deny(verdict.RiskCritical, "chmod %s: setuid/setgid bits make a file run with its owner's privileges (termd runs as root)", grammar.Clip(p.Operands[0].Value))
	}
}

func postMkdir(p *grammar.Parsed) {
	for _, m := range p.Values("-m") {
		if setIDMode(m) {
			p.Deny(verdict.RiskHigh, "mkdir -m %s: setuid/setgid bits are not allowed", grammar.Clip(m))
		}
	}
}

func postRm(p *grammar.Parsed) {
	for _, op := range p.Operands {
		v := op.Value
		b := strings.TrimRight(v, "/")
		if v == "" {
			continue
		}
		if b == "" || b == "." || b == ".." || v == "*" || v == "~" || strings.HasSuffix(b, "/.") || strings.HasSuffix(b, "/..") || b == "/*" || strings.HasSuffix(b, "/*") {
			p.Deny(verdict.RiskCritical, "%s: removing %q would remove the workspace itself", p.Tool, grammar.Clip(v))
		}
	}
	if p.Tool == "rmdir" && p.Has("-p") {
		// rmdir -p a/b/c also removes a/b and a (and so on up to what is
		// named): each is a removal.
		for _, op := range append([]grammar.Operand(nil), p.Operands...) {
			for d := filepath.Dir(strings.TrimRight(op.Value, "/")); d != "." && d != "/" && d != ""; d = filepath.Dir(d) {
				p.Operands = append(p.Operands, grammar.Operand{Value: d, Kind: grammar.KPathWrite})
			}
		}
	}
}

// cpPreservesMode: cp -p, -a, or --preserve with mode or all (or no list).
func cpPreservesMode(pc *grammar.Parsed) bool {
	if pc.Has("-p", "-a") {
		return true
	}
	for _, u := range pc.Opts {
		if grammar.Contains(u.Opt.Names, "--preserve") {
			if !u.Has || u.Value == "" || strings.Contains(u.Value, "mode") || strings.Contains(u.Value, "all") {
				return true
			}
		}
	}
	return false
}

// checkChmodReference: chmod --reference copies the reference's mode,
// setuid/setgid bits included (termd runs as root).
func checkChmodReference(c *toolspec.ToolCall) {
	if c.Cwd == "" {
		return
	}
	for _, v := range c.Pc.Values("--reference") {
		if fi, err := os.Stat(toolspec.ResolvePath(c.Cwd, v)); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			c.Deny(verdict.RiskCritical, "chmod --reference="+grammar.Clip(v)+": the reference is missing or has setuid/setgid bits (termd runs as root)")
		}
	}
}

// checkCpPreserve: cp -p/-a/--preserve copies setuid/setgid bits, and termd
// runs as root.
func checkCpPreserve(c *toolspec.ToolCall) {
	if c.Cwd == "" || !cpPreservesMode(c.Pc) {
		return
	}
	for _, op := range c.Pc.Operands {
		if op.Kind == grammar.KPathRead && toolspec.IsSetID(toolspec.ResolvePath(c.Cwd, op.Value)) {
			c.Deny(verdict.RiskCritical, "cp: "+grammar.Clip(op.Value)+" is setuid/setgid and its mode would be preserved (termd runs as root): copy it without -p/-a/--preserve")
		}
	}
}
