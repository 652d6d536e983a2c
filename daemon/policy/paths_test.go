package policy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/pathmemo"
)

// A decision's memo resolves every path as looking at the file system each
// time does: symlinks relative and absolute, chains, "..", loops, dangling
// links, missing components and /proc, in one memo shared by all of them as
// within one decision.
func TestPathMemoResolvesAsWithout(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(root+"/a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"rel": "a", "abs": root + "/a/b", "chain": "rel/b", "up": "a/b/..", "deep": "a/b/c/../../b",
		"loop1": "loop2", "loop2": "loop1", "dangling": "nowhere/x", "a/b/back": "../..",
	}
	for name, target := range links {
		if err := os.Symlink(target, root+"/"+name); err != nil {
			t.Fatal(err)
		}
	}
	memo := toolspec.PathMemo{}
	for _, p := range []string{
		root, root + "/a/b/c", root + "/rel/b", root + "/abs/c", root + "/chain/c/..", root + "/up/b",
		root + "/deep/c", root + "/loop1/x", root + "/dangling", root + "/dangling/y", root + "/missing/z/..",
		root + "/a/b/back/rel/b/back/abs", root + "/rel/../abs/c", "/proc/self/cwd", "/proc/self/root/etc",
		"/", "/usr/bin/true", root + "/./rel//b/",
	} {
		want := toolspec.ResolveAbs(p, 0)
		if got := memo.Resolve(p, 0); got != want {
			t.Errorf("resolve(%q) with the memo = %q, without = %q", p, got, want)
		}
	}
	if len(memo) == 0 {
		t.Fatal("the memo remembered nothing")
	}
}

// The memo lasts one decision: the next one (Execute's re-check) sees a
// trusted PATH entry or a working directory whose symlink was swapped in
// between.
func TestDecisionsSeeSymlinkSwaps(t *testing.T) {
	f := newFixture(t)
	swap := func(link, target string) {
		t.Helper()
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(f.ws+"/src", f.ws+"/cur"); err != nil {
		t.Fatal(err)
	}
	before := f.decideIn([]string{"cat", "data.txt"}, f.ws+"/cur", verdict.ModeConfirm)
	if before.ResolvedPath != "/usr/bin/true" || before.Cwd != f.ws+"/src" {
		t.Fatalf("before the swap: program %s in %s, want /usr/bin/true in %s/src", before.ResolvedPath, before.Cwd, f.ws)
	}
	swap(f.bin+"/cat", "/usr/bin/false")
	swap(f.ws+"/cur", f.ws+"/dir")
	after := f.decideIn([]string{"cat", "data.txt"}, f.ws+"/cur", verdict.ModeConfirm)
	if after.ResolvedPath != "/usr/bin/false" || after.BinarySHA256 == before.BinarySHA256 {
		t.Errorf("after the swap the program is %s (sha256 %s), want /usr/bin/false with another hash", after.ResolvedPath, after.BinarySHA256)
	}
	if after.Cwd != f.ws+"/dir" {
		t.Errorf("after the swap the cwd resolves to %s, want %s/dir", after.Cwd, f.ws)
	}
	if after.RequestHash == before.RequestHash {
		t.Error("the request hash did not change with the program and cwd")
	}
}

// The program's hash is cached by the file's identity (hashCache): a program
// rewritten in place with the same size and its mtime put back still gets
// its new hash in the next decision (its ctime moved).
func TestProgramHashFollowsRewrites(t *testing.T) {
	f := newFixture(t)
	prog := f.bin + "/tool"
	mustWrite(t, prog, "#!/bin/sh\necho reviewed\n")
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(prog)
	if err != nil {
		t.Fatal(err)
	}
	before := f.decide([]string{"tool"}, verdict.ModeConfirm)
	if before.ResolvedPath != prog || before.BinarySHA256 == "" {
		t.Fatalf("tool resolves to %q (sha256 %q), want %s hashed", before.ResolvedPath, before.BinarySHA256, prog)
	}
	mustWrite(t, prog, "#!/bin/sh\necho swapped!\n")
	if err := os.Chtimes(prog, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	after := f.decide([]string{"tool"}, verdict.ModeConfirm)
	if after.BinarySHA256 == before.BinarySHA256 || after.RequestHash == before.RequestHash {
		t.Errorf("the program was rewritten (same size, same mtime) and its hash %s did not change", after.BinarySHA256)
	}
}

// A decision given the execution's memo (Context.Paths: Execute's re-check)
// looks at the file system through it, so its sandbox sees the same answers
// (a cwd link as the memo holds it); a decision without one looks afresh.
func TestDecideUsesTheExecutionsMemo(t *testing.T) {
	f := newFixture(t)
	if err := os.Symlink(f.ws+"/src", f.ws+"/cur"); err != nil {
		t.Fatal(err)
	}
	ctx := f.ctx
	ctx.Paths = pathmemo.Memo{}
	req := decision.Request{Argv: []string{"cat", "data.txt"}, Cwd: f.ws + "/cur", Mode: verdict.ModeConfirm}
	if d := f.pol.Decide(req, ctx); d.Cwd != f.ws+"/src" {
		t.Fatalf("the cwd resolves to %s, want %s/src", d.Cwd, f.ws)
	}
	for _, p := range []string{f.ws, f.ws + "/cur"} {
		if _, ok := ctx.Paths[p]; !ok {
			t.Errorf("the decision did not keep what it saw of %s in the execution's memo", p)
		}
	}
	if err := os.Remove(f.ws + "/cur"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.ws+"/dir", f.ws+"/cur"); err != nil {
		t.Fatal(err)
	}
	if d := f.pol.Decide(req, ctx); d.Cwd != f.ws+"/src" {
		t.Errorf("with the same execution's memo the cwd resolves to %s, want %s/src", d.Cwd, f.ws)
	}
	if d := f.decideIn(req.Argv, req.Cwd, req.Mode); d.Cwd != f.ws+"/dir" {
		t.Errorf("a decision of its own sees the cwd as %s, want %s/dir", d.Cwd, f.ws)
	}
}
