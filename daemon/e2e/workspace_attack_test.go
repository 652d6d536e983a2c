package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// An agent owns a directory in the workspace and swaps it with a symlink to
// a root-only directory while asking termd (root) to read a file in it. The
// read must never return the root-only file.
func TestAgentWorkspaceReadCannotRaceASymlinkSwap(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{Config: agentConfig})
	agent := agentClient(t, d, harness.Nobody)

	secretDir, err := os.MkdirTemp("", "termd-rootonly-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(secretDir)
	_ = os.Chmod(secretDir, 0o755) // searchable, but the file is root's 0600
	if err := os.WriteFile(filepath.Join(secretDir, "f.txt"), []byte("ROOT-ONLY-CONTENT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.Workspace, "d")
	link := filepath.Join(d.Workspace, "dlink")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("agent text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(dir, 65534, 65534)
	_ = os.Chown(filepath.Join(dir, "f.txt"), 65534, 65534)
	if err := os.Symlink(secretDir, link); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var swapper sync.WaitGroup
	swapper.Add(1)
	go func() {
		defer swapper.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Atomically exchange the real directory and the symlink.
			_ = unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
		}
	}()
	var leaked, served atomic.Int64
	var readers sync.WaitGroup
	deadline := time.Now().Add(4 * time.Second)
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for time.Now().Before(deadline) {
				r, err := agent.Workspace.ReadWorkspaceFile(ctxT(t), &termdv1.ReadWorkspaceFileRequest{Path: "d/f.txt"})
				if err != nil {
					continue
				}
				served.Add(1)
				if strings.Contains(r.Text, "ROOT-ONLY") {
					leaked.Add(1)
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	swapper.Wait()
	if n := leaked.Load(); n > 0 {
		t.Fatalf("an agent read a root-only file %d times through a symlink swap (%d reads served)", n, served.Load())
	}
	t.Logf("%d reads served, none leaked", served.Load())
}

// A FIFO in the workspace must not hang the daemon's read (termd opens files as root).
func TestAgentWorkspaceReadOfFIFODoesNotHang(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{Config: agentConfig})
	agent := agentClient(t, d, harness.Nobody)
	fifo := filepath.Join(d.Workspace, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := agent.Workspace.ReadWorkspaceFile(ctx, &termdv1.ReadWorkspaceFileRequest{Path: "pipe"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("reading a FIFO: want InvalidArgument (not a regular file) at once, got %v", err)
	}
}

// setACL gives path a POSIX access ACL: the owner, group and others as in
// mode, plus a named-user entry granting uid the bits perm (0 = none). The
// xattr is written directly, so no setfacl is needed.
func setACL(t *testing.T, path string, mode os.FileMode, uid uint32, perm uint16) {
	t.Helper()
	const undefined = 0xffffffff
	entry := func(tag, perm uint16, id uint32) []byte {
		return []byte{byte(tag), byte(tag >> 8), byte(perm), byte(perm >> 8), byte(id), byte(id >> 8), byte(id >> 16), byte(id >> 24)}
	}
	acl := []byte{2, 0, 0, 0}                                       // version 2
	acl = append(acl, entry(0x01, uint16(mode>>6&7), undefined)...) // owner
	acl = append(acl, entry(0x02, perm, uid)...)                    // named user
	acl = append(acl, entry(0x04, uint16(mode>>3&7), undefined)...) // owning group
	acl = append(acl, entry(0x10, uint16(mode>>3&7), undefined)...) // mask
	acl = append(acl, entry(0x20, uint16(mode&7), undefined)...)    // others
	if err := unix.Setxattr(path, "system.posix_acl_access", acl, 0); err != nil {
		t.Fatalf("setting a POSIX ACL on %s: %v (the test needs a filesystem with ACLs)", path, err)
	}
}

// A named-user ACL entry can deny a user whom the mode bits allow: termd must
// answer a workspace read with the kernel's decision for the caller.
func TestWorkspaceReadHonoursADenyACL(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{Config: agentConfig})
	agent := agentClient(t, d, harness.Nobody)
	for _, name := range []string{"open.txt", "denied.txt"} {
		if err := os.WriteFile(filepath.Join(d.Workspace, name), []byte("text of "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setACL(t, filepath.Join(d.Workspace, "denied.txt"), 0o644, 65534, 0)
	if err := exec.Command("cat", filepath.Join(d.Workspace, "denied.txt")).Run(); err != nil {
		t.Fatalf("root cannot read the file: %v", err)
	}
	if r, err := agent.Workspace.ReadWorkspaceFile(ctxT(t), &termdv1.ReadWorkspaceFileRequest{Path: "open.txt"}); err != nil || !strings.Contains(r.Text, "text of open.txt") {
		t.Fatalf("the agent reads a 0644 file without an ACL: %v", err)
	}
	r, err := agent.Workspace.ReadWorkspaceFile(ctxT(t), &termdv1.ReadWorkspaceFileRequest{Path: "denied.txt"})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "not readable by") {
		t.Fatalf("uid 65534 read a file whose ACL denies it (mode 0644): %v %q", err, r.GetText())
	}
	// The same through a directory whose ACL denies the search.
	sub := filepath.Join(d.Workspace, "sub")
	_ = os.Mkdir(sub, 0o755)
	_ = os.WriteFile(filepath.Join(sub, "f.txt"), []byte("inner\n"), 0o644)
	setACL(t, sub, 0o755, 65534, 4) // may list, may not search
	if _, err := agent.Workspace.ReadWorkspaceFile(ctxT(t), &termdv1.ReadWorkspaceFileRequest{Path: "sub/f.txt"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("uid 65534 read through a directory its ACL may not search: %v", err)
	}
	// An operator (root) still reads both.
	if r, err := d.Client.Workspace.ReadWorkspaceFile(ctxT(t), &termdv1.ReadWorkspaceFileRequest{Path: "denied.txt"}); err != nil || !strings.Contains(r.Text, "text of denied.txt") {
		t.Fatalf("root reading the file: %v", err)
	}
}
