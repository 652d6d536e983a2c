package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/internal/pathmemo"
)

// linkTree is a workspace (base/ws, holding directories a and b) and the
// path of a hidden link in it, not made yet (base/ws/state).
func linkTree(t *testing.T) (base, ws, link string) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(base, "ws")
	for _, d := range []string{"ws/a", "ws/b", "tmp"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base, ws, filepath.Join(ws, "state")
}

// The hidden paths' memo serves one execution: a hidden path whose link is
// swapped between two executions is hidden where it leads at the second.
func TestMountsSeeAHiddenLinkSwapped(t *testing.T) {
	base, ws, link := linkTree(t)
	p := domain.Profile{Profile: domain.WorkspaceWrite}
	paths := Paths{Workspaces: []string{ws}, Tmp: filepath.Join(base, "tmp"), Cwd: ws, Hidden: []string{link}}
	for _, target := range []string{"a", "b", "a"} {
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		var hidden []string
		for _, m := range mountsFor(p, paths, buildRules(p, paths)) {
			if m.Kind == "hide" {
				hidden = append(hidden, m.Path)
			}
		}
		if want := filepath.Join(ws, target); !slices.Equal(hidden, []string{want}) {
			t.Errorf("with %s -> %s the execution hides %v, want [%s]", link, target, hidden, want)
		}
	}
}

// An execution's memo (Paths.Memo: its policy re-check's) serves its hidden
// paths: they are resolved as the re-check saw the file system, in one
// moment, and the next execution's own memo sees a link swapped since.
func TestMountsShareTheExecutionsMemo(t *testing.T) {
	base, ws, link := linkTree(t)
	if err := os.Symlink("a", link); err != nil {
		t.Fatal(err)
	}
	p := domain.Profile{Profile: domain.WorkspaceWrite}
	hides := func(memo pathmemo.Memo) []string {
		paths := Paths{Workspaces: []string{ws}, Tmp: filepath.Join(base, "tmp"), Cwd: ws, Hidden: []string{link}, Memo: memo}
		var hidden []string
		for _, m := range mountsFor(p, paths, buildRules(p, paths)) {
			if m.Kind == "hide" {
				hidden = append(hidden, m.Path)
			}
		}
		return hidden
	}
	memo := pathmemo.Memo{}
	for _, c := range []string{"/", base, ws, link} {
		memo.Lstat(filepath.Clean(c)) // what the re-check looked at
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b", link); err != nil {
		t.Fatal(err)
	}
	if got, want := hides(memo), []string{filepath.Join(ws, "a")}; !slices.Equal(got, want) {
		t.Errorf("with the execution's memo it hides %v, want %v (as its re-check saw it)", got, want)
	}
	if got, want := hides(pathmemo.Memo{}), []string{filepath.Join(ws, "b")}; !slices.Equal(got, want) {
		t.Errorf("the next execution hides %v, want %v", got, want)
	}
}

// The character devices every profile names are asked only the rights a
// file may carry (the kernel refuses a directory's on them); a directory
// keeps its rights, and a rule beneath HOME is asked as it is.
func TestRuleRightsOfDevices(t *testing.T) {
	handled := handledFS(5)
	devWrite := uint64(unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE)
	for _, r := range mergeRules([]rule{{path: "/dev/null", access: devWrite}, {path: "/usr", access: accessRead}, {path: "/dev/null", access: accessRead}, {path: "/dev/urandom", access: accessRead | accessExec}}) {
		got := ruleRights(r, handled)
		want := r.access & handled
		if charDevices[r.path] {
			want &= fileRights
		}
		if got != want || (charDevices[r.path] && got&unix.LANDLOCK_ACCESS_FS_READ_DIR != 0) {
			t.Errorf("%s: rights %#x, want %#x", r.path, got, want)
		}
		if r.path == "/usr" && got&unix.LANDLOCK_ACCESS_FS_READ_DIR == 0 {
			t.Errorf("/usr lost READ_DIR: %#x", got)
		}
	}
	if r := (rule{path: "/dev/null", access: accessRead, beneath: "/home/x"}); ruleRights(r, handled) != accessRead {
		t.Errorf("a rule beneath HOME: %#x", ruleRights(r, handled))
	}
}
