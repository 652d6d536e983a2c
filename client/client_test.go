package client

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// A refusal's hint is in the terms of the transport it came over: the
// local socket's roles, or the certificates of listen_tls; a code with no
// hint gets none.
func TestRefusalHintsByTransport(t *testing.T) {
	for _, c := range []struct {
		target string
		code   codes.Code
		hint   string
	}{
		{"/run/termd/termd.sock", codes.PermissionDenied, "ask an operator, or check the roles in the daemon's config"},
		{"/run/termd/termd.sock", codes.Unauthenticated, "your user has no role in termd's config"},
		{"/run/termd/termd.sock", codes.DeadlineExceeded, "the daemon did not answer in time"},
		{"/run/termd/termd.sock", codes.NotFound, ""},
		{TLSScheme + "termd.example:7443", codes.PermissionDenied, "ask the operator of that termd to map your certificate in listen_tls.clients, or to give it a stronger role"},
		{TLSScheme + "termd.example:7443", codes.Unauthenticated, "your certificate has no principal in that termd's listen_tls.clients"},
		{TLSScheme + "termd.example:7443", codes.DeadlineExceeded, "termd did not answer in time"},
		{TLSScheme + "termd.example:7443", codes.InvalidArgument, ""},
	} {
		var e *Error
		if !errors.As(wrap(c.target, status.Error(c.code, "refused")), &e) {
			t.Fatalf("%s %v: not an *Error", c.target, c.code)
		}
		if e.Hint != c.hint || e.Code != c.code || e.Message != "refused" {
			t.Errorf("%s %v: %v %q hint %q, want hint %q", c.target, c.code, e.Code, e.Message, e.Hint, c.hint)
		}
	}
}
