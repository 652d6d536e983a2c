package toolspec

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/pathmemo"
)

// ResolvePath makes p absolute against cwd and follows symlinks component
// by component (so "link/.." means what the kernel means). Components that
// do not exist yet are appended lexically to the deepest existing parent.
func ResolvePath(cwd, p string) string { return PathMemo(nil).ResolvePath(cwd, p) }

func ResolveAbs(p string, depth int) string { return PathMemo(nil).Resolve(p, depth) }

// PathMemo remembers, for one decision, what each path component it looked
// at was (Lstat, and a symlink's target). A decision resolves the workspace
// roots, the protected paths, the cwd, the trusted PATH and the program,
// which share parents (/usr, the workspace's), so it would look at each of
// those several times; with the memo it looks once, and every resolution in
// the decision sees the file system of one moment. A memo lives for one
// Decide only, or for one execution (Context.Paths: Execute's re-check and
// the execution's sandbox share one): the next decision looks again. A nil
// memo looks every time.
type PathMemo pathmemo.Memo

// lstat is what Lstat (and Readlink, for a symlink) said of p: missing
// when Lstat failed, and a link's target ("" when it could not be read).
func (m PathMemo) lstat(p string) (missing, link bool, target string) {
	e := pathmemo.Memo(m).Lstat(p)
	return e.Err != nil, e.Link, e.Target
}

func (m PathMemo) ResolvePath(cwd, p string) string {
	if !filepath.IsAbs(p) {
		p = cwd + "/" + p
	}
	return m.Resolve(p, 0)
}

func (m PathMemo) Resolve(p string, depth int) string {
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
		gone, link, target := m.lstat(next)
		if gone {
			missing, cur = true, next
			continue
		}
		if link {
			if Within("/proc", cur) {
				// /proc symlinks (self, thread-self, <pid>/fd/N, <pid>/cwd,
				// <pid>/root) mean something else in the child than in the
				// daemon: keep them lexical so /proc rules apply.
				return filepath.Clean(next + "/" + strings.Join(parts[idx+1:], "/"))
			}
			if depth > 40 {
				return next // loop: treat as opaque
			}
			if target == "" {
				cur = next
				continue
			}
			if !filepath.IsAbs(target) {
				target = cur + "/" + target
			}
			rest := strings.Join(parts[idx+1:], "/")
			return m.Resolve(target+"/"+rest, depth+1)
		}
		cur = next
	}
	return filepath.Clean(cur)
}

// Within reports whether p is root or below it, by path components.
func Within(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// ExpandPattern turns "~/x" into concrete prefixes for home (and for any
// home when the principal's home is unknown).
func ExpandPattern(pat, home string) []string {
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

// MatchPrefix reports whether p is at or below the pattern, where the
// pattern's components may use path.Match globs.
func MatchPrefix(pattern, p string) bool {
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

// IsAncestorOf reports whether p is a strict ancestor of the literal part
// of the pattern (a recursive read of p would reach it).
func IsAncestorOf(p, pattern string) bool {
	lit := pattern
	if i := strings.IndexAny(lit, "*?["); i >= 0 {
		lit = filepath.Dir(lit[:i+1])
	}
	return p != lit && Within(p, lit)
}

type PathVerdict struct {
	Verdict verdict.Verdict
	Risk    verdict.Risk
	Reason  string
}

// WhyOwn: termd's own files are never reachable from an execution.
const WhyOwn = ": denied even inside the sandbox, since a command that could read or change them could forge receipts, approvals or the policy itself"

// HardLinked decides a workspace file that has other names (hard links):
// its path says nothing about where the other names are, so writing it may
// change a file outside the workspace, and reading it may read one that only
// privileged users could read by its other name.
func HardLinked(real string, write bool) (PathVerdict, bool) {
	fi, err := os.Lstat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return PathVerdict{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return PathVerdict{}, false
	}
	n := strconv.FormatUint(uint64(st.Nlink), 10)
	if write {
		return PathVerdict{verdict.Deny, verdict.RiskHigh, "write to " + real + " is denied: the file has " + n + " hard-linked names and writing it changes all of them, which may be outside the workspace (copy it to a new file and work on that)"}, true
	}
	if fi.Mode().Perm()&0o004 == 0 {
		return PathVerdict{verdict.Deny, verdict.RiskHigh, "read of " + real + " is denied: the file has " + n + " hard-linked names and other users cannot read it (mode " + fi.Mode().Perm().String() + "), so it may be a private file from outside the workspace"}, true
	}
	return PathVerdict{}, false
}

// PrivilegedOnly names why real can be read only by privileged users, or
// "" (also when it does not exist). Directories that cannot be listed are
// reported too.
func PrivilegedOnly(real string) string {
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

// RecursiveOutside reports whether a recursive read of real (outside the
// workspace) may reach files the policy cannot see.
func RecursiveOutside(real string) bool {
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return false
	}
	for _, r := range recursiveReadRoots {
		if Within(r, real) {
			return false
		}
	}
	return true
}
