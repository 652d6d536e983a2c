//go:build linux

package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// newNetns makes a namespace with NewNetns (root only).
func newNetns(t *testing.T) int {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("TERMD_REQUIRE_SANDBOX") != "" {
			t.Fatal("network namespaces need root")
		}
		t.Skip("network namespaces need root")
	}
	fd, err := NewNetns()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// inNetns runs f on a thread inside the namespace nsfd.
func inNetns(nsfd int, f func()) {
	if err := onThread(nsfd, func() error { f(); return nil }); err != nil {
		panic(err)
	}
}

// The listener lives in the execution's namespace (reachable only from
// there, at 127.0.0.1), and the proxy connects out from the daemon's.
func TestListenInNetnsReachesOutFromTheHost(t *testing.T) {
	nsfd := newNetns(t)
	up, err := net.Listen("tcp", "127.0.0.1:0") // the daemon's namespace
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			c.Close()
		}
	}()
	port := portOf(t, up.Addr().String())
	l, err := ParseList("t", []string{"up.test:" + port})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Options{List: l, Hosts: pin("up.test")})
	defer p.Close()
	ln, err := ListenInNetns(nsfd, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	paddr := ln.Addr().String()

	// From the daemon's namespace the proxy's port is not there.
	if c, err := net.Dial("tcp", paddr); err == nil {
		c.Close()
		t.Fatalf("the proxy at %s answered in the daemon's namespace", paddr)
	}
	var got string
	var upDirect error
	inNetns(nsfd, func() {
		// Inside, the upstream is not reachable directly...
		if c, err := net.Dial("tcp", up.Addr().String()); err == nil {
			c.Close()
		} else {
			upDirect = err
		}
		// ...but through the proxy it is.
		c, err := net.Dial("tcp", paddr)
		if err != nil {
			got = err.Error()
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "GET http://up.test:%s/ HTTP/1.1\r\nHost: up.test:%s\r\n\r\n", port, port)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			got = err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		got = resp.Status + " " + string(b)
	})
	if upDirect == nil {
		t.Error("the upstream was reachable from inside the namespace without the proxy")
	}
	if got != "200 OK ok" {
		t.Fatalf("through the proxy from inside the namespace: %q", got)
	}
	if d := p.Summary().Destinations; len(d) != 1 || d[0].BytesDown == 0 {
		t.Fatalf("destinations %+v", d)
	}
}

func TestSelfTest(t *testing.T) {
	newNetns(t) // root, or skip
	if err := SelfTest(); err != nil {
		t.Fatal(err)
	}
}
