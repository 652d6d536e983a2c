package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/termd/termd/daemon/domain"
)

// The hidden paths' memo serves one execution: a hidden path whose link is
// swapped between two executions is hidden where it leads at the second.
func TestMountsSeeAHiddenLinkSwapped(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	for _, d := range []string{"ws/a", "ws/b", "tmp"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(ws, "state")
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
