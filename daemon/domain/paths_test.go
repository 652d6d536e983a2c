package domain

import (
	"os"
	"path/filepath"
	"testing"
)

// A directory's workspace is the root that holds it once its links are
// resolved; a sibling that shares a root's prefix is in none.
func TestWorkspaceOf(t *testing.T) {
	base := t.TempDir()
	if real, err := filepath.EvalSymlinks(base); err == nil {
		base = real
	}
	ws, other := filepath.Join(base, "ws"), filepath.Join(base, "other")
	for _, d := range []string{filepath.Join(ws, "src"), filepath.Join(base, "ws2"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(other, "into")
	if err := os.Symlink(filepath.Join(ws, "src"), link); err != nil {
		t.Fatal(err)
	}
	roots := []string{ws + "/", other}
	for dir, want := range map[string]string{
		filepath.Join(ws, "src"): ws + "/", link: ws + "/", other: other,
		filepath.Join(base, "ws2"): "", base: "", filepath.Join(ws, "gone"): ws + "/",
	} {
		if got := WorkspaceOf(dir, roots); got != want {
			t.Errorf("WorkspaceOf(%s) = %q, want %q", dir, got, want)
		}
	}
	if got := WorkspaceOf(ws, []string{ws}); got != ws {
		t.Errorf("the root itself: %q", got)
	}
}
