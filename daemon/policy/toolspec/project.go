package toolspec

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
)

// A tool's project entry files (toolSpec.entry) are the files it reads as
// the project's code or build configuration when it runs project code. Their
// digests are part of the canonical request, so an approval covers what they
// said when it was given: a Makefile changed after approval makes the plan
// stale. Other files they pull in (included makefiles, scripts, sources) are
// not covered.

// EntryFileName reports whether a file's base name is an entry file of some
// tool (Makefile, package.json, go.mod, ...), compared without case like the
// protected names.
func EntryFileName(path string) bool {
	base := filepath.Base(path)
	for _, t := range Tools() {
		if t.Entry == nil {
			continue
		}
		for _, n := range t.Entry.Names {
			if strings.EqualFold(n, base) {
				return true
			}
		}
	}
	return false
}

// maxProjectFile bounds how much of one entry file is hashed.
const maxProjectFile = 16 << 20

// ProjectFiles digests the entry files of a command that runs project code:
// path -> "sha256:HEX", "absent", or why it could not be read.
func ProjectFiles(pc *grammar.Parsed, paths []string) map[string]string {
	if !pc.Code || len(paths) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, p := range paths {
		out[p] = projectFileDigest(p)
	}
	return out
}

// ProjectEntryPaths are the entry files a tool reads in the directories it
// works in (cwd, -C, workspace members) and, for tools that search upwards,
// in each parent up to the workspace root. In cwd every name is listed (an
// absent file is bound as absent); above it only files that exist.
func ProjectEntryPaths(t *ToolSpec, pc *grammar.Parsed, cwd string, ctx *DecideCtx) []string {
	if t == nil || t.Entry == nil || cwd == "" {
		return nil
	}
	e := t.Entry
	dir := cwd
	if e.Chdir != "" {
		// make -C and go -C change directory in turn before reading anything.
		for _, d := range pc.Values(e.Chdir) {
			if d != "" {
				dir = ResolvePath(dir, d)
			}
		}
	}
	dirs := []string{dir}
	if e.Dirs != nil {
		dirs = append(dirs, e.Dirs(pc, dir)...)
	}
	var paths []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for _, d := range dirs {
		for _, n := range e.Names {
			add(filepath.Join(d, n))
		}
		if !e.WalksUp {
			continue
		}
		ups := DirsUpTo(d, ctx)
		for i := 1; i < len(ups); i++ {
			up := ups[i]
			for _, n := range e.Names {
				if _, err := os.Lstat(filepath.Join(up, n)); err == nil {
					add(filepath.Join(up, n))
				}
			}
		}
	}
	if e.Extra != nil {
		for _, f := range e.Extra(pc, dir, cwd, append([]string(nil), paths...)) {
			add(f)
		}
	}
	return paths
}

// OptionFiles lists the files named by a tool's options, relative to dir.
func OptionFiles(pc *grammar.Parsed, dir string, names ...string) []string {
	var out []string
	for _, f := range pc.Values(names...) {
		out = append(out, ResolvePath(dir, f))
	}
	return out
}

// DirsUpTo lists dir and its parents while they lie in a workspace (empty
// when dir does not): where tools that search upwards look.
func DirsUpTo(dir string, ctx *DecideCtx) []string {
	var out []string
	for d := dir; InAnyWorkspace(d, ctx); d = filepath.Dir(d) {
		out = append(out, d)
		if d == "/" {
			break
		}
	}
	return out
}

func projectFileDigest(path string) string {
	fi, err := os.Stat(path)
	switch {
	case os.IsNotExist(err):
		return "absent"
	case err != nil:
		return "unreadable: " + err.Error()
	case !fi.Mode().IsRegular():
		return "not a regular file"
	case fi.Size() > maxProjectFile:
		return "too large to hash: " + strconv.FormatInt(fi.Size(), 10) + " bytes"
	}
	sum, err := FileSHA256(path)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return "sha256:" + sum
}

// SortedKeys lists a map's keys in order, for explanations.
func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
