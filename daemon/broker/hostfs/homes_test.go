package hostfs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/daemon/config"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// agent is the principal the commands' homes are made for in these tests.
var agent = &termdv1.Principal{Uid: 65534, Gid: 65534, Name: "nobody", Role: termdv1.Role_ROLE_AGENT}

// newTestFS is the host file system part of a broker whose state directory
// and workspace are temp directories, laid out as the broker's tests lay
// them out (a state directory whose sibling may hold the homes).
func newTestFS(t *testing.T) *FS {
	t.Helper()
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	dir, _ = filepath.EvalSymlinks(dir)
	ws := filepath.Join(dir, "ws")
	state := filepath.Join(dir, "state")
	for _, d := range []string{ws, state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(state, 0o700)
	cfg := config.Default()
	cfg.StateDir = state
	cfg.Workspaces = []string{ws}
	return New(Deps{
		Config:    func() *config.Config { return cfg },
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Protected: func() []string { return []string{state} },
	})
}

// ctimeOf is a file's inode change time.
func ctimeOf(t *testing.T, path string) syscall.Timespec {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ctim
}

// HOME and its base get their mode and owner at every start, but are
// written only when they differ: an unchanged one keeps its inode as it was.
func TestHomeWrittenOnlyWhenWrong(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("HOME is given to another uid: needs root")
	}
	h := newTestFS(t)
	uid, gid := int(agent.Uid), int(agent.Gid)
	home, err := h.HomeFor(uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Dir(home)
	before := [2]syscall.Timespec{ctimeOf(t, base), ctimeOf(t, home)}
	time.Sleep(20 * time.Millisecond) // past the file system's clock granularity
	if _, err := h.HomeFor(uid, gid); err != nil {
		t.Fatal(err)
	}
	if after := [2]syscall.Timespec{ctimeOf(t, base), ctimeOf(t, home)}; after != before {
		t.Errorf("an unchanged HOME and base were written again: ctimes %v, then %v", before, after)
	}
	// Wrong ones are put right.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(home, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.HomeFor(uid, gid); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(base); st.Mode().Perm() != 0o711 {
		t.Errorf("base mode %v, want 0711", st.Mode())
	}
	if st, _ := os.Lstat(home); st.Sys().(*syscall.Stat_t).Uid != agent.Uid || st.Sys().(*syscall.Stat_t).Gid != agent.Gid {
		t.Errorf("HOME owner %d:%d, want %d:%d", st.Sys().(*syscall.Stat_t).Uid, st.Sys().(*syscall.Stat_t).Gid, agent.Uid, agent.Gid)
	}
}
