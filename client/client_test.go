package client

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// staleSocket leaves a socket file nothing listens on, as a killed termd does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = l.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the stale socket file is not there: %v", err)
	}
}

func statusErr(t *testing.T, socket string) error {
	t.Helper()
	c, err := Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.Daemon.GetStatus(ctx, &termdv1.GetStatusRequest{})
	if err == nil {
		t.Fatal("Status answered with nothing listening")
	}
	return err
}

// After make run stops (killed, so its socket file stays), termctl must not
// send the user to that dead socket, and must say the socket it was given is
// a leftover rather than just "not reachable".
func TestDeadMakeRunSocketIsNotSuggested(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir(".run", 0o700); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, ".run", "termd.sock")
	staleSocket(t, local)

	err := statusErr(t, filepath.Join(dir, "elsewhere.sock"))
	if strings.Contains(err.Error(), local) {
		t.Fatalf("the hint points at make run's dead socket: %v", err)
	}
	if !strings.Contains(err.Error(), "not reachable") {
		t.Fatalf("error does not say termd is not reachable: %v", err)
	}

	// TERMD_SOCKET still names the dead socket: say what it is.
	err = statusErr(t, local)
	if !strings.Contains(err.Error(), "left over from a termd that stopped") {
		t.Fatalf("error does not say the socket file is a leftover: %v", err)
	}

	// A live make run socket is still suggested.
	_ = os.Remove(local)
	l, lerr := net.Listen("unix", local)
	if lerr != nil {
		t.Fatal(lerr)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	err = statusErr(t, filepath.Join(dir, "elsewhere.sock"))
	if !strings.Contains(err.Error(), "a termd started by `make run` listens at "+local) {
		t.Fatalf("a live make run socket is not suggested: %v", err)
	}
}
