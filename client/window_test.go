package client_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// A client of the unix socket sends termd no pings: gRPC's window
// estimation would answer each response with one (BDP), a round trip per
// call that a local socket has no use for. The calls go through a relay
// that reads the client's HTTP/2 frames.
func TestUnixClientSendsNoPings(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	dir, err := os.MkdirTemp("", "relay")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	relay := filepath.Join(dir, "s")
	l, err := net.Listen("unix", relay)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pings := make(chan int, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			pings <- -1
			return
		}
		defer c.Close()
		up, err := net.Dial("unix", d.Socket)
		if err != nil {
			pings <- -1
			return
		}
		defer up.Close()
		go func() { _, _ = io.Copy(c, up) }()
		pings <- countPings(io.TeeReader(c, up))
	}()

	c, err := client.Dial(relay)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 {
		if _, err := c.Daemon.GetStatus(ctx, &termdv1.GetStatusRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if n := <-pings; n != 0 {
		t.Fatalf("the client sent %d pings over 3 calls, want none", n)
	}
}

// countPings reads a client's side of an HTTP/2 connection until it ends
// and counts the PING frames it sent (not acks of the server's).
func countPings(r io.Reader) int {
	br := bufio.NewReader(r)
	if _, err := io.ReadFull(br, make([]byte, len(http2.ClientPreface))); err != nil {
		return -1
	}
	fr := http2.NewFramer(io.Discard, br)
	n := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return n
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			n++
		}
	}
}
