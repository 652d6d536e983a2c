// Package wire holds what termd and its clients agree on besides the proto:
// where the daemon's socket is, and the gRPC metadata keys a transport may
// send. It is a leaf, so the daemon does not import the client library for
// them and the clients do not import the daemon.
package wire

import (
	"os"
	"path/filepath"
	"strings"
)

// Metadata keys a transport may send. The daemon only ever lowers a caller's
// role from them, and takes a display name only from operators (the gateway).
const (
	MDRole = "x-termd-role"
	MDVia  = "x-termd-via"
	MDName = "x-termd-name"
)

// SystemSocket is where a system-wide termd listens (the systemd unit, or
// termd started as root without --socket).
const SystemSocket = "/run/termd/termd.sock"

// UserSocket is the socket of a termd run by a user, under that user's
// runtime directory ($XDG_RUNTIME_DIR).
func UserSocket(runtimeDir string) string {
	return filepath.Join(runtimeDir, "termd", "termd.sock")
}

// OperatorSocketEnv names the operator socket when it is not beside the
// socket under its usual name (operator_socket in termd's config).
const OperatorSocketEnv = "TERMD_OPERATOR_SOCKET"

// OperatorSocket is the operator socket that goes with socket: beside it,
// its name with "-operator" before ".sock" (termd.sock: termd-operator.sock).
// Only root and termd's own user can open it (mode 0600), so no agent can
// crowd operators off it.
func OperatorSocket(socket string) string {
	dir, base := filepath.Split(socket)
	return filepath.Join(dir, strings.TrimSuffix(base, ".sock")+"-operator.sock")
}

// DefaultSocket returns $TERMD_SOCKET, else the per-user or system socket path.
func DefaultSocket() string {
	if s := os.Getenv("TERMD_SOCKET"); s != "" {
		return s
	}
	if os.Geteuid() != 0 {
		if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
			return UserSocket(rt)
		}
	}
	return SystemSocket
}
