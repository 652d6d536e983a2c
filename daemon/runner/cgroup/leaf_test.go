//go:build linux

package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A fake v2 tree: the kernel's files are plain files here, which is enough to
// check when termd moves itself into a leaf and what it writes.
func fakeCgroup(t *testing.T, controllers, procs string, leafReady bool) (mount, own string) {
	mount = t.TempDir()
	own = "/system.slice/termd.service"
	dir := filepath.Join(mount, own)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte(controllers), 0o644)
	os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(procs), 0o644)
	os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), nil, 0o644)
	if leafReady {
		os.Mkdir(filepath.Join(dir, "daemon"), 0o755)
		os.WriteFile(filepath.Join(dir, "daemon", "cgroup.procs"), nil, 0o644)
	}
	return mount, own
}

func TestMoveToLeafOnlyWhenTermdIsAloneWithControllers(t *testing.T) {
	self := os.Getpid()
	mount, own := fakeCgroup(t, "cpu pids memory", fmt.Sprint(self), true)
	if got := moveToLeaf(mount, own, self); !strings.HasPrefix(got, "moved") {
		t.Fatalf("alone with pids/memory: %q", got)
	}
	moved, _ := os.ReadFile(filepath.Join(mount, own, "daemon", "cgroup.procs"))
	ctl, _ := os.ReadFile(filepath.Join(mount, own, "cgroup.subtree_control"))
	if string(moved) != fmt.Sprint(self) || !strings.HasPrefix(string(ctl), "+") {
		t.Fatalf("leaf procs %q, subtree_control %q", moved, ctl)
	}
	for name, c := range map[string]struct{ ctl, procs string }{
		"another process shares the cgroup": {"pids memory", fmt.Sprintf("%d\n1234\n", self)},
		"no controllers to delegate":        {"cpu", fmt.Sprint(self)},
	} {
		m, o := fakeCgroup(t, c.ctl, c.procs, true)
		if got := moveToLeaf(m, o, self); got != "" {
			t.Errorf("%s: moved anyway: %q", name, got)
		}
	}
	if got := moveToLeaf(mount, "/", self); got != "" {
		t.Errorf("root cgroup: %q", got)
	}
	// A leaf that cannot take the process is removed again.
	m, o := fakeCgroup(t, "pids", fmt.Sprint(self), false)
	if got := moveToLeaf(m, o, self); !strings.HasPrefix(got, "not moved") {
		t.Fatalf("failed move: %q", got)
	}
	if _, err := os.Stat(filepath.Join(m, o, "daemon")); err == nil {
		t.Error("the unused leaf was left behind")
	}
}
