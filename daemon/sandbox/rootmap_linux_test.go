package sandbox_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/sandbox"
)

// A command run for root whose workspace cannot be mounted idmapped is
// refused, naming the tree, instead of running as host root; the same host
// with a workspace on a file system that can is prepared with the
// namespace and the idmapped binds.
func TestRootMapRefusedWithoutIdmappedMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mapping root needs termd as root")
	}
	sup := host(t)
	ws := t.TempDir()
	prof := domain.Profile{Profile: domain.WorkspaceWrite}
	// /proc/sys: procfs takes no idmapped mount.
	_, _, err := sandbox.Prepare(prof, sandbox.Paths{Workspaces: []string{"/proc/sys", ws}, RootMap: sandbox.DefaultRootMapUID}, sandbox.Required, sup)
	var rm *sandbox.RootMapError
	if !errors.As(err, &rm) || !strings.Contains(err.Error(), "/proc/sys cannot be mounted idmapped") || !strings.Contains(err.Error(), "--privileged") {
		t.Fatalf("a root run with a workspace on procfs: %v; want a RootMapError naming /proc/sys and --privileged", err)
	}
	l, rec, err := sandbox.Prepare(prof, sandbox.Paths{Workspaces: []string{ws}, RootMap: sandbox.DefaultRootMapUID}, sandbox.Required, sup)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rec.RootMappedTo != sandbox.DefaultRootMapUID || l.Config.UserNSFD == 0 || len(l.Config.Mounts) == 0 || l.Config.Mounts[0].Kind != "idmap" || l.Config.Mounts[0].Path != ws {
		t.Fatalf("a root run with a workspace on %s: record %+v, userns fd %d, mounts %+v", ws, rec, l.Config.UserNSFD, l.Config.Mounts)
	}
	// Without root to map nothing of it is added.
	l2, rec2, err := sandbox.Prepare(prof, sandbox.Paths{Workspaces: []string{"/proc/sys", ws}}, sandbox.Required, sup)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if rec2.RootMappedTo != 0 || l2.Config.UserNSFD != 0 {
		t.Fatalf("a run that keeps its uid got a user namespace: %+v %d", rec2, l2.Config.UserNSFD)
	}
}
