package policy

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// resolvePath makes p absolute against cwd and follows symlinks component
// by component (so "link/.." means what the kernel means). Components that
// do not exist yet are appended lexically to the deepest existing parent.
func resolvePath(cwd, p string) string { return pathMemo(nil).resolvePath(cwd, p) }

func resolveAbs(p string, depth int) string { return pathMemo(nil).resolve(p, depth) }

// pathMemo remembers, for one decision, what each path component it looked
// at was (Lstat, and a symlink's target). A decision resolves the workspace
// roots, the protected paths, the cwd, the trusted PATH and the program,
// which share parents (/usr, the workspace's), so it would look at each of
// those several times; with the memo it looks once, and every resolution in
// the decision sees the file system of one moment. A memo lives for one
// Decide only: the next decision (Execute's re-check) looks again. A nil
// memo looks every time.
type pathMemo map[string]component

// component is what Lstat (and Readlink, for a symlink) said of a path.
type component struct {
	missing bool   // Lstat failed
	link    bool   // a symlink
	target  string // its target; "" when it could not be read
}

func (m pathMemo) lstat(p string) component {
	if c, ok := m[p]; ok {
		return c
	}
	var c component
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		c.missing = true
	case fi.Mode()&os.ModeSymlink != 0:
		c.link = true
		c.target, _ = os.Readlink(p)
	}
	if m != nil {
		m[p] = c
	}
	return c
}

func (m pathMemo) resolvePath(cwd, p string) string {
	if !filepath.IsAbs(p) {
		p = cwd + "/" + p
	}
	return m.resolve(p, 0)
}

func (m pathMemo) resolve(p string, depth int) string {
	parts := strings.Split(p, "/")
	cur := "/"
	missing := false
	for idx, c := range parts {
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		if missing {
			cur = next
			continue
		}
		st := m.lstat(next)
		if st.missing {
			missing, cur = true, next
			continue
		}
		if st.link {
			if within("/proc", cur) {
				// /proc symlinks (self, thread-self, <pid>/fd/N, <pid>/cwd,
				// <pid>/root) mean something else in the child than in the
				// daemon: keep them lexical so /proc rules apply.
				return filepath.Clean(next + "/" + strings.Join(parts[idx+1:], "/"))
			}
			if depth > 40 {
				return next // loop: treat as opaque
			}
			if st.target == "" {
				cur = next
				continue
			}
			target := st.target
			if !filepath.IsAbs(target) {
				target = cur + "/" + target
			}
			rest := strings.Join(parts[idx+1:], "/")
			return m.resolve(target+"/"+rest, depth+1)
		}
		cur = next
	}
	return filepath.Clean(cur)
}

// within reports whether p is root or below it, by path components.
func within(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// expandPattern turns "~/x" into concrete prefixes for home (and for any
// home when the principal's home is unknown).
func expandPattern(pat, home string) []string {
	if !strings.HasPrefix(pat, "~/") {
		return []string{pat}
	}
	rest := pat[1:]
	out := []string{"/root" + rest, "/home/*" + rest}
	if home != "" && filepath.IsAbs(home) {
		out = append(out, filepath.Clean(home)+rest)
	}
	return out
}

// matchPrefix reports whether p is at or below the pattern, where the
// pattern's components may use path.Match globs.
func matchPrefix(pattern, p string) bool {
	pc := strings.Split(strings.Trim(pattern, "/"), "/")
	xc := strings.Split(strings.Trim(p, "/"), "/")
	if pattern == "/" {
		return true
	}
	if len(xc) < len(pc) {
		return false
	}
	for i, c := range pc {
		ok, err := path.Match(c, xc[i])
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// isAncestorOf reports whether p is a strict ancestor of the literal part
// of the pattern (a recursive read of p would reach it).
func isAncestorOf(p, pattern string) bool {
	lit := pattern
	if i := strings.IndexAny(lit, "*?["); i >= 0 {
		lit = filepath.Dir(lit[:i+1])
	}
	return p != lit && within(p, lit)
}

type pathVerdict struct {
	verdict Verdict
	risk    Risk
	reason  string
}

// whyOwn: termd's own files are never reachable from an execution.
const whyOwn = ": denied even inside the sandbox, since a command that could read or change them could forge receipts, approvals or the policy itself"

// checkPath decides one resolved path. names says the command reads only
// the names and metadata of what is below a directory (ls /etc).
func (p *Policy) checkPath(real string, write, names bool, ctx *decideCtx) pathVerdict {
	spec := &p.spec
	// termd's own files: no reads or writes.
	for _, pr := range ctx.protected {
		if within(pr, real) {
			return pathVerdict{Deny, RiskCritical, "path " + real + " is termd's own configuration, policy, key or state" + whyOwn}
		}
		if write && within(real, pr) {
			return pathVerdict{Deny, RiskCritical, "write to " + real + " would reach termd's own files" + whyOwn}
		}
	}
	for _, pat := range spec.Paths.SensitiveRead {
		for _, e := range expandPattern(pat, ctx.home) {
			if matchPrefix(e, real) {
				return pathVerdict{Deny, RiskCritical, "path " + real + " holds secrets (" + pat + "): denied even inside the sandbox, since what a command reads it can print into its output, and so into the receipt and the agent's context"}
			}
		}
	}
	if write {
		if why := p.protectedWrite(real, ctx); why != "" {
			return pathVerdict{Deny, RiskCritical, "write to " + real + " is denied: " + why + " (denied even inside the sandbox: what the file holds runs later, outside it)"}
		}
	}
	inWS := inAnyWorkspace(real, ctx)
	if inWS {
		if v, ok := hardLinked(real, write); ok {
			return v
		}
	}
	if write && real == "/dev/null" {
		// Output thrown away (curl -o /dev/null, sort -o /dev/null): the
		// sandbox lets every command write there too.
		return pathVerdict{Allow, RiskLow, ""}
	}
	if write {
		if !inWS {
			return pathVerdict{Deny, RiskHigh, "write to " + real + " is outside the workspace roots"}
		}
		for _, ws := range ctx.workspaces {
			if real == ws {
				return pathVerdict{Ask, RiskHigh, "write to the workspace root directory " + real}
			}
		}
		return pathVerdict{Allow, RiskLow, ""}
	}
	if inWS {
		return pathVerdict{Allow, RiskLow, ""}
	}
	// termd runs as root: a file outside the workspace that ordinary users
	// cannot read (mode, or an unsearchable parent) is a secret by
	// definition (/etc/krb5.keytab, /etc/kubernetes/admin.conf, /root/...).
	if why := privilegedOnly(real); why != "" {
		return pathVerdict{Deny, RiskHigh, "read of " + real + " outside the workspace is denied: " + why + " (termd runs as root)"}
	}
	for _, pat := range spec.Paths.SensitiveRead {
		if names {
			break
		}
		for _, e := range expandPattern(pat, ctx.home) {
			if isAncestorOf(real, e) {
				return pathVerdict{Ask, RiskHigh, "read of " + real + " outside the workspace may reach secrets (" + pat + ")"}
			}
		}
	}
	for _, pat := range spec.Paths.PublicRead {
		if matchPrefix(pat, real) {
			return pathVerdict{Allow, RiskMedium, "read of public system path " + real + " outside the workspace"}
		}
	}
	if p.systemRead(real) {
		if names {
			return pathVerdict{Allow, RiskMedium, "read of the names in system path " + real + " outside the workspace"}
		}
		// /etc as a whole holds configuration that is world-readable by
		// accident on many machines: only paths.public_read is free.
		return pathVerdict{Ask, RiskMedium, "read of " + real + " outside the workspace: only toolchain directories and public facts (paths.public_read) are read without approval"}
	}
	return pathVerdict{Ask, RiskMedium, "read of " + real + " outside the workspace roots"}
}

// protectedWrite names why a write target later runs code, or "".
func (p *Policy) protectedWrite(real string, ctx *decideCtx) string {
	spec := &p.spec
	for _, pat := range spec.Paths.Protected {
		for _, e := range expandPattern(pat, ctx.home) {
			if matchPrefix(e, real) {
				return "protected path " + pat
			}
		}
	}
	// Names compare without case: on a case-insensitive file system (macOS)
	// ".GIT/CONFIG" is .git/config.
	comps := strings.Split(strings.Trim(real, "/"), "/")
	last := comps[len(comps)-1]
	for _, n := range spec.Paths.ProtectedNames {
		if strings.EqualFold(last, n) {
			return n + " files run code or configure tools that do"
		}
	}
	for i, c := range comps {
		for _, d := range spec.Paths.ProtectedDirs {
			if strings.EqualFold(c, d) {
				return d + " holds editor, agent or tool configuration that runs code"
			}
		}
		if strings.EqualFold(c, ".git") {
			if i == len(comps)-1 {
				return ".git directory itself"
			}
			// hooks, config, config.worktree, info/attributes, modules/*/config,
			// worktrees/*/: everything in a git directory is git's to write.
			return ".git/" + strings.Join(comps[i+1:], "/") + " is repository state and configuration (hooks, config) that can run code"
		}
	}
	return ""
}

// hardLinked decides a workspace file that has other names (hard links):
// its path says nothing about where the other names are, so writing it may
// change a file outside the workspace, and reading it may read one that only
// privileged users could read by its other name.
func hardLinked(real string, write bool) (pathVerdict, bool) {
	fi, err := os.Lstat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return pathVerdict{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return pathVerdict{}, false
	}
	n := strconv.FormatUint(uint64(st.Nlink), 10)
	if write {
		return pathVerdict{Deny, RiskHigh, "write to " + real + " is denied: the file has " + n + " hard-linked names and writing it changes all of them, which may be outside the workspace (copy it to a new file and work on that)"}, true
	}
	if fi.Mode().Perm()&0o004 == 0 {
		return pathVerdict{Deny, RiskHigh, "read of " + real + " is denied: the file has " + n + " hard-linked names and other users cannot read it (mode " + fi.Mode().Perm().String() + "), so it may be a private file from outside the workspace"}, true
	}
	return pathVerdict{}, false
}

// privilegedOnly names why real can be read only by privileged users, or
// "" (also when it does not exist). Directories that cannot be listed are
// reported too.
func privilegedOnly(real string) string {
	fi, err := os.Stat(real)
	if err != nil {
		return ""
	}
	if fi.Mode().Perm()&0o004 == 0 && (fi.Mode().IsRegular() || fi.IsDir() || fi.Mode()&os.ModeDevice != 0) {
		return "it is not readable by other users (mode " + fi.Mode().Perm().String() + ")"
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		if di, err := os.Stat(d); err == nil && di.Mode().Perm()&0o001 == 0 {
			return "its directory " + d + " is not searchable by other users"
		}
		if d == "/" || d == "." {
			break
		}
	}
	return ""
}

// recursiveReadRoots are trees that recursive reads may search without
// asking (program and library files).
var recursiveReadRoots = []string{"/usr", "/opt", "/lib", "/lib32", "/lib64", "/bin", "/sbin"}

// recursiveOutside reports whether a recursive read of real (outside the
// workspace) may reach files the policy cannot see.
func recursiveOutside(real string) bool {
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return false
	}
	for _, r := range recursiveReadRoots {
		if within(r, real) {
			return false
		}
	}
	return true
}
