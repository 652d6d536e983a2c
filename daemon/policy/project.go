package policy

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// projectEntryFiles are the files a tool reads as the project's code or
// build configuration when it runs project code. Their digests are part of
// the canonical request, so an approval covers what they said when it was
// given: a Makefile changed after approval makes the plan stale. Other files
// they pull in (included makefiles, scripts, sources) are not covered.
var projectEntryFiles = map[string][]string{
	"make":   {"GNUmakefile", "makefile", "Makefile"},
	"npm":    {"package.json"},
	"pnpm":   {"package.json", ".pnpmfile.cjs"},
	"yarn":   {"package.json", ".yarnrc.yml"},
	"cargo":  {"Cargo.toml", "build.rs"},
	"pytest": {"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"},
	"go":     {"go.mod"},
}

// maxProjectFile bounds how much of one entry file is hashed.
const maxProjectFile = 16 << 20

// projectFiles digests the entry files of a command that runs project code:
// path -> "sha256:HEX", "absent", or why it could not be read.
func projectFiles(pc *parsed, cwd string) map[string]string {
	if !pc.code {
		return nil
	}
	paths := projectEntryPaths(pc, cwd)
	if len(paths) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, p := range paths {
		out[p] = projectFileDigest(p)
	}
	return out
}

// projectEntryPaths are the entry files a tool reads in the directories it
// works in (cwd, -C, a workspace member).
func projectEntryPaths(pc *parsed, cwd string) []string {
	names, ok := projectEntryFiles[pc.tool]
	if !ok || cwd == "" {
		return nil
	}
	dir := cwd
	// make -C and go -C change directory in turn before reading anything.
	for _, d := range pc.values("-C") {
		if d != "" && (pc.tool == "make" || pc.tool == "go") {
			dir = resolvePath(dir, d)
		}
	}
	var paths []string
	for _, n := range names {
		paths = append(paths, filepath.Join(dir, n))
	}
	switch pc.tool {
	case "make":
		for _, f := range pc.values("-f") {
			paths = append(paths, resolvePath(dir, f))
		}
	case "cargo":
		for _, m := range pc.values("--manifest-path") {
			m = resolvePath(cwd, m)
			paths = append(paths, m, filepath.Join(filepath.Dir(m), "build.rs"))
		}
	case "npm", "pnpm", "yarn":
		// -w/--workspace/--filter members and -C/--dir/--cwd directories
		// have their own package.json, which is what runs.
		for _, d := range pc.values("-w", "-C", "--cwd") {
			if d != "" && !strings.ContainsAny(d, "*{}@") {
				paths = append(paths, resolvePath(dir, d)+"/package.json")
			}
		}
	}
	return paths
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

// npmrcRisky are .npmrc keys that move where npm writes (outside the
// workspace: location=global installs into /usr) or what it reads or runs.
var npmrcRisky = set("location global prefix userconfig globalconfig cache logs-dir tmp node-options script-shell shell git editor browser viewer init-module onload-script")

// npmrcProblems reads the .npmrc files npm would use between cwd and the
// workspace root and names the keys termd does not accept there.
func npmrcProblems(cwd string, ctx *decideCtx) []string {
	var out []string
	for dir := cwd; dir != "" && inAnyWorkspace(dir, ctx); dir = filepath.Dir(dir) {
		f := filepath.Join(dir, ".npmrc")
		data, err := os.ReadFile(f)
		if err == nil {
			if len(data) > 1<<16 {
				out = append(out, f+" is too large to check")
			}
			for _, line := range strings.Split(string(data), "\n") {
				line = strings.TrimSpace(line)
				if line == "" || line[0] == '#' || line[0] == ';' {
					continue
				}
				k, _, _ := strings.Cut(line, "=")
				k = strings.ToLower(strings.TrimSpace(k))
				if npmrcRisky[k] {
					out = append(out, f+" sets "+k+", which moves where npm writes or what it reads or runs; remove that line")
				}
			}
		}
		if dir == "/" {
			break
		}
	}
	return out
}
