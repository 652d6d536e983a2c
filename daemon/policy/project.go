package policy

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A tool's project entry files (toolSpec.entry) are the files it reads as
// the project's code or build configuration when it runs project code. Their
// digests are part of the canonical request, so an approval covers what they
// said when it was given: a Makefile changed after approval makes the plan
// stale. Other files they pull in (included makefiles, scripts, sources) are
// not covered.

// entryFileName reports whether a file's base name is an entry file of some
// tool (Makefile, package.json, go.mod, ...), compared without case like the
// protected names.
func entryFileName(path string) bool {
	base := filepath.Base(path)
	for _, t := range tools() {
		if t.entry == nil {
			continue
		}
		for _, n := range t.entry.names {
			if strings.EqualFold(n, base) {
				return true
			}
		}
	}
	return false
}

// maxProjectFile bounds how much of one entry file is hashed.
const maxProjectFile = 16 << 20

// projectFiles digests the entry files of a command that runs project code:
// path -> "sha256:HEX", "absent", or why it could not be read.
func projectFiles(pc *parsed, paths []string) map[string]string {
	if !pc.code || len(paths) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, p := range paths {
		out[p] = projectFileDigest(p)
	}
	return out
}

// projectEntryPaths are the entry files a tool reads in the directories it
// works in (cwd, -C, workspace members) and, for tools that search upwards,
// in each parent up to the workspace root. In cwd every name is listed (an
// absent file is bound as absent); above it only files that exist.
func projectEntryPaths(t *toolSpec, pc *parsed, cwd string, ctx *decideCtx) []string {
	if t == nil || t.entry == nil || cwd == "" {
		return nil
	}
	e := t.entry
	dir := cwd
	if e.chdir != "" {
		// make -C and go -C change directory in turn before reading anything.
		for _, d := range pc.values(e.chdir) {
			if d != "" {
				dir = resolvePath(dir, d)
			}
		}
	}
	dirs := []string{dir}
	if e.dirs != nil {
		dirs = append(dirs, e.dirs(pc, dir)...)
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
		for _, n := range e.names {
			add(filepath.Join(d, n))
		}
		if !e.walksUp {
			continue
		}
		ups := dirsUpTo(d, ctx)
		for i := 1; i < len(ups); i++ {
			up := ups[i]
			for _, n := range e.names {
				if _, err := os.Lstat(filepath.Join(up, n)); err == nil {
					add(filepath.Join(up, n))
				}
			}
		}
	}
	if e.extra != nil {
		for _, f := range e.extra(pc, dir, cwd, append([]string(nil), paths...)) {
			add(f)
		}
	}
	return paths
}

// optionFiles lists the files named by a tool's options, relative to dir.
func optionFiles(pc *parsed, dir string, names ...string) []string {
	var out []string
	for _, f := range pc.values(names...) {
		out = append(out, resolvePath(dir, f))
	}
	return out
}

// dirsUpTo lists dir and its parents while they lie in a workspace (empty
// when dir does not): where tools that search upwards look.
func dirsUpTo(dir string, ctx *decideCtx) []string {
	var out []string
	for d := dir; inAnyWorkspace(d, ctx); d = filepath.Dir(d) {
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
	sum, err := fileSHA256(path)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return "sha256:" + sum
}

// sortedKeys lists a map's keys in order, for explanations.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
