//go:build linux

package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// SelfTest runs the whole path an egress execution uses, on this host: a new
// network namespace, the proxy's listener made inside it, a client inside
// the namespace asking the proxy for a name pinned to a server in the
// daemon's namespace, and the answer back. It needs root (network
// namespaces); nil means egress works here.
func SelfTest() error {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on the host's loopback: %w", err)
	}
	defer up.Close()
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		}
	}()
	port := up.Addr().(*net.TCPAddr).Port
	const name = "selftest.termd.invalid"
	l, err := ParseList("selftest", []string{name + ":" + strconv.Itoa(port)})
	if err != nil {
		return err
	}
	nsfd, err := NewNetns()
	if err != nil {
		return err
	}
	defer unix.Close(nsfd)
	ln, err := ListenInNetns(nsfd, "127.0.0.1:0")
	if err != nil {
		return err
	}
	p := New(Options{List: l, Hosts: map[string]netip.Addr{name: netip.MustParseAddr("127.0.0.1")}})
	defer p.Close()
	go func() { _ = p.Serve(ln) }()
	return onThread(nsfd, func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return fmt.Errorf("reach the proxy from inside the namespace: %w", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n\r\n", name, port, name, port)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return fmt.Errorf("read the proxy's answer: %w", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "ok" {
			return fmt.Errorf("the proxy answered %s %q", resp.Status, b)
		}
		return nil
	})
}
