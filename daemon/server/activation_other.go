//go:build !linux

package server

import (
	"net"
	"os"
)

// Activated reports no inherited socket: systemd socket activation is Linux
// only. Under launchd termd creates its own sockets (see deploy/launchd).
func Activated() (shared, operator net.Listener, err error) {
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	return nil, nil, nil
}
