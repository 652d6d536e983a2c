package policy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var _ = family(registerFiles)

// Tools that change files: cp, mv, rm, rmdir, mkdir, touch, ln, chmod.
func registerFiles() {
	R, W := KPathRead, KPathWrite
	register("cp", &toolSpec{check: checkCpPreserve, grammar: &cmdSpec{operand: R, hasLast: true, last: W, write: true, plainWrite: true, post: postCopy, opts: opts(flags("-a|--archive -b -d -f|--force -i|--interactive -H -L|--dereference -n|--no-clobber -P|--no-dereference -p --parents -R|-r|--recursive --remove-destination --strip-trailing-slashes -T|--no-target-directory -u -v|--verbose -x|--one-file-system -Z --attributes-only --copy-contents --debug --keep-directory-symlink --help --version"),
		list(o("-l|--link").notPlainWrite("makes hard links that share the sources' content"), o("-s|--symbolic-link").notPlainWrite("makes symbolic links"), o("--backup?"), o("--preserve?"), o("--no-preserve="), o("--reflink?"), o("--sparse="), o("-S|--suffix="), o("-t|--target-directory=", W), o("--update?"), o("--context?")))}})
	register("mv", &toolSpec{removes: true, writesNoContent: true, grammar: &cmdSpec{operand: W, write: true, plainWrite: true, post: postCopy, opts: opts(flags("-b -f|--force -i|--interactive -n|--no-clobber --strip-trailing-slashes -T|--no-target-directory -u -v|--verbose -Z|--context --exchange --no-copy --debug --help --version"), list(o("--backup?"), o("-S|--suffix="), o("-t|--target-directory=", W), o("--update?")))}})
	register("rm", &toolSpec{removes: true, writesNoContent: true, grammar: &cmdSpec{operand: W, write: true, post: postRm, opts: opts(flags("-f|--force -i -I -r|-R|--recursive -d|--dir -v|--verbose --one-file-system --preserve-root --help --version"), list(o("--interactive?"), o("--no-preserve-root").denyWith("removes / recursively")))}})
	register("rmdir", &toolSpec{removes: true, grammar: &cmdSpec{operand: W, write: true, post: postRm, opts: flags("-p|--parents -v|--verbose --ignore-fail-on-non-empty --help --version")}})
	reg("mkdir", &cmdSpec{operand: W, write: true, plainWrite: true, post: postMkdir, opts: opts(flags("-p|--parents -v|--verbose -Z --help --version"), list(o("-m|--mode="), o("--context?")))})
	reg("touch", &cmdSpec{operand: W, write: true, plainWrite: true, opts: opts(flags("-a -c|--no-create -m -h|--no-dereference -f --help --version"), list(o("-d|--date="), o("-t="), o("-r|--reference=", R), o("--time=")))})
	reg("ln", &cmdSpec{operand: KOther, hasLast: true, last: W, write: true, post: postLn, opts: opts(flags("-b -d|-F|--directory -f|--force -i|--interactive -L|--logical -n|--no-dereference -P|--physical -r|--relative -s|--symbolic -T|--no-target-directory -v|--verbose --help --version"), list(o("--backup?"), o("-S|--suffix="), o("-t|--target-directory=", W)))})
	register("chmod", &toolSpec{writesNoContent: true, check: checkChmodReference, grammar: &cmdSpec{operandLike: chmodModeRE.MatchString, operand: W, hasFirst: true, first: KOther, write: true, post: postChmod, opts: opts(flags("-c|--changes -f|--silent|--quiet -v|--verbose -R|--recursive --preserve-root --dereference -h|--no-dereference --help --version"), list(o("--reference=", R), o("--no-preserve-root").denyWith("changes / recursively")))}})
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

// cpPreservesMode: cp -p, -a, or --preserve with mode or all (or no list).
func cpPreservesMode(pc *parsed) bool {
	if pc.has("-p", "-a") {
		return true
	}
	for _, u := range pc.opts {
		if contains(u.opt.names, "--preserve") {
			if !u.has || u.value == "" || strings.Contains(u.value, "mode") || strings.Contains(u.value, "all") {
				return true
			}
		}
	}
	return false
}

// checkChmodReference: chmod --reference copies the reference's mode,
// setuid/setgid bits included (termd runs as root).
func checkChmodReference(c *toolCall) {
	if c.cwd == "" {
		return
	}
	for _, v := range c.pc.values("--reference") {
		if fi, err := os.Stat(resolvePath(c.cwd, v)); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			c.deny(RiskCritical, "chmod --reference="+clip(v)+": the reference is missing or has setuid/setgid bits (termd runs as root)")
		}
	}
}

// checkCpPreserve: cp -p/-a/--preserve copies setuid/setgid bits, and termd
// runs as root.
func checkCpPreserve(c *toolCall) {
	if c.cwd == "" || !cpPreservesMode(c.pc) {
		return
	}
	for _, op := range c.pc.operands {
		if op.kind == KPathRead && isSetID(resolvePath(c.cwd, op.value)) {
			c.deny(RiskCritical, "cp: "+clip(op.value)+" is setuid/setgid and its mode would be preserved (termd runs as root): copy it without -p/-a/--preserve")
		}
	}
}
