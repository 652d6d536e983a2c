package e2e

import (
	"context"
	"os"
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
