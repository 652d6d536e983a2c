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
