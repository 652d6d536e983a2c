package wire

import (
	"os"
	"testing"
)

// The clients and the daemon find the same socket: $TERMD_SOCKET first, then
// the user's runtime directory (non-root), then the system socket.
func TestDefaultSocket(t *testing.T) {
	t.Setenv("TERMD_SOCKET", "/tmp/x/termd.sock")
	if got := DefaultSocket(); got != "/tmp/x/termd.sock" {
		t.Errorf("with TERMD_SOCKET: %q", got)
	}
	t.Setenv("TERMD_SOCKET", "")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	want := "/run/user/1000/termd/termd.sock"
	if os.Geteuid() == 0 {
		want = SystemSocket
	}
	if got := DefaultSocket(); got != want {
		t.Errorf("DefaultSocket() = %q, want %q", got, want)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	if got := DefaultSocket(); got != SystemSocket {
		t.Errorf("without XDG_RUNTIME_DIR: %q, want %q", got, SystemSocket)
	}
}

// The operator socket is beside the socket, named after it.
func TestOperatorSocket(t *testing.T) {
	for sock, want := range map[string]string{
		"/run/termd/termd.sock":  "/run/termd/termd-operator.sock",
		"/x/.run/termd.sock":     "/x/.run/termd-operator.sock",
		"/tmp/t/run/broker":      "/tmp/t/run/broker-operator.sock",
		"/tmp/t/run/broker.sock": "/tmp/t/run/broker-operator.sock",
	} {
		if got := OperatorSocket(sock); got != want {
			t.Errorf("OperatorSocket(%q) = %q, want %q", sock, got, want)
		}
	}
}
