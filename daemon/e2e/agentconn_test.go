package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
)

// dialHelperEnv makes the test binary connect to a socket and hand the
// connected descriptor back on fd 3 (SCM_RIGHTS), then wait until the test
// closes its end: the daemon refuses connections whose connecting process
// is gone, so the helper lives as long as the connection is used. The daemon
// records the helper's uid at connect time, so the test process gets a
// connection that really is another principal's.
const dialHelperEnv = "TERMD_E2E_DIAL_AS_HELPER"

func TestMain(m *testing.M) {
	if sock := os.Getenv(dialHelperEnv); sock != "" {
		os.Exit(dialHelper(sock))
	}
	if spec := os.Getenv(floodHelperEnv); spec != "" {
		os.Exit(floodHelper(spec))
	}
	os.Exit(m.Run())
}

func dialHelper(sock string) int {
	c, err := net.Dial("unix", sock)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 2
	}
	f, _ := c.(*net.UnixConn).File()
	back := os.NewFile(3, "back")
	bc, err := net.FileConn(back)
	if err != nil {
		return 3
	}
	if _, _, err := bc.(*net.UnixConn).WriteMsgUnix([]byte{1}, syscall.UnixRights(int(f.Fd())), nil); err != nil {
		return 4
	}
	_, _ = bc.Read(make([]byte, 1)) // until the test is done with the connection
	return 0
}

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// helperBinary is a copy of this test binary that other uids may execute.
func helperBinary(t *testing.T) string {
	helperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "termd-e2e-helper-")
		if err != nil {
			helperErr = err
			return
		}
		_ = os.Chmod(dir, 0o755)
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			helperErr = err
			return
		}
		helperPath = filepath.Join(dir, "e2e.test")
		helperErr = os.WriteFile(helperPath, data, 0o755)
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	return helperPath
}

// connAs returns a unix connection to the daemon whose peer credentials are cred's.
func connAs(t *testing.T, sock string, cred *syscall.Credential) net.Conn {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "mine"), os.NewFile(uintptr(fds[1]), "theirs")
	cmd := exec.Command(helperBinary(t))
	cmd.Env = []string{dialHelperEnv + "=" + sock}
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("dial helper as uid %d: %v", cred.Uid, err)
	}
	theirs.Close()
	mc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mc.Close(); _ = cmd.Wait() })
	buf, oob := make([]byte, 1), make([]byte, 64)
	_, oobn, _, _, err := mc.(*net.UnixConn).ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("no descriptor from the dial helper: %v", err)
	}
	got, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(got) != 1 {
		t.Fatalf("no descriptor from the dial helper: %v", err)
	}
	f := os.NewFile(uintptr(got[0]), "termd")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// agentClient is a typed client whose one connection carries cred's peer
// credentials (the daemon sees that uid, as it would for termd-mcp).
func agentClient(t *testing.T, d *harness.Daemon, cred *syscall.Credential) *client.Client {
	t.Helper()
	c := connAs(t, d.Socket, cred)
	used := false
	conn, err := grpc.NewClient("passthrough:///termd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) {
			if used {
				return nil, os.ErrClosed
			}
			used = true
			return c, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ac := client.FromConn(conn, d.Socket)
	t.Cleanup(func() { ac.Close() })
	return ac
}

const agentConfig = "socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534]\n"
