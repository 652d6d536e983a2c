//go:build linux

package server

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// listenFDsStart is the first inherited descriptor (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// Activated returns the listening unix sockets handed over by a service
// manager (systemd socket activation: LISTEN_PID, LISTEN_FDS and optionally
// LISTEN_FDNAMES), or nils when termd was not socket-activated. The
// variables are removed from the environment so commands termd runs never
// see them. The socket named "termd" (or the first unix stream socket not
// named "termd-operator") is the shared socket; the one named
// "termd-operator" (termd-operator.socket) is the operator socket, nil when
// none was passed.
func Activated() (shared, operator net.Listener, err error) {
	pidStr, fdsStr := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS")
	names := os.Getenv("LISTEN_FDNAMES")
	defer func() {
		os.Unsetenv("LISTEN_PID")
		os.Unsetenv("LISTEN_FDS")
		os.Unsetenv("LISTEN_FDNAMES")
	}()
	if fdsStr == "" {
		return nil, nil, nil
	}
	if pid, err := strconv.Atoi(pidStr); err != nil || pid != os.Getpid() {
		// Meant for another process (e.g. inherited through a shell).
		return nil, nil, nil
	}
	n, err := strconv.Atoi(fdsStr)
	if err != nil || n < 1 {
		return nil, nil, fmt.Errorf("socket activation: LISTEN_FDS=%q is not a positive count", fdsStr)
	}
	var fdNames []string
	if names != "" {
		fdNames = strings.Split(names, ":")
	}
	pick, op := -1, -1
	for i := 0; i < n; i++ {
		fd := listenFDsStart + i
		syscall.CloseOnExec(fd)
		if !isUnixStreamListener(fd) {
			continue
		}
		name := ""
		if i < len(fdNames) {
			name = fdNames[i]
		}
		switch {
		case name == "termd-operator":
			if op < 0 {
				op = fd
			}
		case name == "termd":
			pick = fd
		case pick < 0:
			pick = fd
		}
	}
	if pick < 0 {
		return nil, nil, fmt.Errorf("socket activation: none of the %d inherited descriptors is a listening unix stream socket (check ListenStream= in termd.socket)", n)
	}
	// Close the descriptors we do not use.
	for i := 0; i < n; i++ {
		if fd := listenFDsStart + i; fd != pick && fd != op {
			syscall.Close(fd)
		}
	}
	if op >= 0 {
		if operator, err = fileListener(op, "termd-operator.socket"); err != nil {
			syscall.Close(pick)
			return nil, nil, err
		}
	}
	if shared, err = fileListener(pick, "termd.socket"); err != nil {
		if operator != nil {
			operator.Close()
		}
		return nil, nil, err
	}
	shareDir(shared.Addr().String())
	return shared, operator, nil
}

// fileListener turns an inherited descriptor into a listener (and closes
// the descriptor: the listener holds a dup of it).
func fileListener(fd int, name string) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), name)
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("socket activation: fd %d (%s): %w", fd, name, err)
	}
	return l, nil
}

// shareDir makes the socket's directory 0750 and gives it the socket's group,
// so members of the group (SocketGroup= in termd.socket) can reach the socket
// even after the service manager (RuntimeDirectory=) reset the directory to
// root:root. Best effort: a directory we cannot change stays as it is.
func shareDir(path string) {
	if !filepath.IsAbs(path) {
		return
	}
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return
	}
	dir := filepath.Dir(path)
	if dir == "/" || dir == os.TempDir() {
		return
	}
	_ = os.Chown(dir, -1, int(st.Gid))
	_ = os.Chmod(dir, 0o750)
}

func isUnixStreamListener(fd int) bool {
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return false
	}
	if _, ok := sa.(*syscall.SockaddrUnix); !ok {
		return false
	}
	typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE)
	if err != nil || typ != syscall.SOCK_STREAM {
		return false
	}
	acc, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	return err == nil && acc == 1
}
