package server

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// connectHelperEnv makes the test binary connect to a socket, hand the
// connected descriptor back on fd 3 and exit: the connection outlives the
// process whose credentials the kernel recorded for it.
const connectHelperEnv = "TERMD_SERVER_CONNECT_HELPER"

func TestMain(m *testing.M) {
	if sock := os.Getenv(connectHelperEnv); sock != "" {
		c, err := net.Dial("unix", sock)
		if err != nil {
			os.Exit(2)
		}
		f, _ := c.(*net.UnixConn).File()
		back, err := net.FileConn(os.NewFile(3, "back"))
		if err != nil {
			os.Exit(3)
		}
		if _, _, err := back.(*net.UnixConn).WriteMsgUnix([]byte{1}, syscall.UnixRights(int(f.Fd())), nil); err != nil {
			os.Exit(4)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A command can connect from a short-lived child and keep the connection in
// a process that survives it. When termd checks the peer, the recorded pid is
// gone and nothing ties it to an execution any more: the connection must be
// refused rather than trusted.
func TestHandshakeRefusesPeerWhoseProcessIsGone(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "mine"), os.NewFile(uintptr(fds[1]), "theirs")
	defer mine.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{connectHelperEnv + "=" + sock}
	cmd.ExtraFiles = []*os.File{theirs}
	if out, err := cmd.CombinedOutput(); err != nil { // waits: the helper is reaped
		t.Fatalf("helper: %v %s", err, out)
	}
	theirs.Close()
	helperPid := int32(cmd.Process.Pid)
	// Keep the client end open, as the surviving process would.
	mc, _ := net.FileConn(mine)
	buf, oob := make([]byte, 1), make([]byte, 64)
	_, oobn, _, _, err := mc.(*net.UnixConn).ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
	got, _ := syscall.ParseUnixRights(&msgs[0])
	defer syscall.Close(got[0])

	srv, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// The real check (runner.IsExecutionProcess) cannot place a pid that no
	// longer exists; model it as "refuse only what is known to be ours".
	creds := peerCreds{refuse: func(pid int32) error { return nil }}
	_, info, err := creds.ServerHandshake(srv)
	if err == nil {
		t.Fatalf("the handshake accepted pid %d, which exited before it was checked (%v)", helperPid, info)
	}

	// A live peer (this process) is accepted.
	c2, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	srv2, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	if _, _, err := creds.ServerHandshake(srv2); err != nil {
		t.Fatalf("a live peer was refused: %v", err)
	}
}
