package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// realPaths.resolve answers what filepath.EvalSymlinks answers (the real
// path, or an error) for links absolute and relative, chains, "..", links
// through links, dangling and looping links and a file used as a
// directory, with one memo across all of them as mountsFor uses it.
func TestRealPathsAsEvalSymlinks(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a/b/c", "x/y"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "a/b/c/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"abs":       filepath.Join(base, "a/b"),
		"rel":       "a/b/c",
		"x/up":      "../a",
		"x/y/chain": "../up/b",
		"x/file":    "../a/b/c/f",
		"dangling":  "nowhere/else",
		"loop1":     "loop2",
		"loop2":     "loop1",
		"a/b/dots":  "./c/../../b/c",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(base, l)); err != nil {
			t.Fatal(err)
		}
	}
	memo := realPaths{}
	for _, p := range []string{
		"a/b/c/f", "abs", "abs/c/f", "rel/f", "x/up/b/c", "x/y/chain/c/f", "x/file", "x/file/more",
		"a/b/c/f/more", "a/b/c/f/..", "a/b/c/f/", "x/file/", "abs/", "a/b/c/f/.", "dangling", "dangling/x", "loop1", "loop2/x", "a/b/dots/f", "missing", "a/missing/..",
		"a/b/../b/c", "x/y/../up/b/", "abs/../../x", ".", "a//b/./c",
	} {
		full := filepath.Join(base, p)
		if p == "a//b/./c" || p == "x/y/../up/b/" || p == "a/missing/.." || p == "a/b/c/f/.." || p == "a/b/c/f/" || p == "x/file/" || p == "abs/" || p == "a/b/c/f/." {
			full = base + "/" + p // unclean, as a configured path may be
		}
		want, wantErr := filepath.EvalSymlinks(full)
		got, err := memo.resolve(full)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Errorf("resolve(%s) = %q, %v; EvalSymlinks: %q, %v", full, got, err, want, wantErr)
		}
	}
}
