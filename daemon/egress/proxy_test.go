package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/termd/termd/receipt"
)

// startProxy serves a proxy for list on a loopback port.
func startProxy(t *testing.T, list []string, o Options) (*Proxy, string) {
	t.Helper()
	l, err := ParseList("test", list)
	if err != nil {
		t.Fatal(err)
	}
	o.List = l
	p := New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	t.Cleanup(func() { p.Close() })
	return p, ln.Addr().String()
}

func pin(name string) map[string]netip.Addr {
	return map[string]netip.Addr{name: netip.MustParseAddr("127.0.0.1")}
}

func portOf(t *testing.T, addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProxyHTTPForwardCounts(t *testing.T) {
	body := strings.Repeat("tarball", 1000)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Error("Proxy-Authorization was forwarded")
		}
		io.WriteString(w, body)
	}))
	defer up.Close()
	port := portOf(t, up.Listener.Addr().String())
	p, paddr := startProxy(t, []string{"registry.test:" + port}, Options{Hosts: pin("registry.test")})
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: paddr, User: url.UserPassword("u", "p")})}}
	resp, err := c.Get("http://registry.test:" + port + "/pkg/-/pkg-1.0.0.tgz")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != body {
		t.Fatalf("status %d, body %d bytes", resp.StatusCode, len(got))
	}
	s := p.Summary()
	if len(s.Destinations) != 1 || len(s.Refused) != 0 {
		t.Fatalf("summary %+v", s)
	}
	d := s.Destinations[0]
	if d.Host != "registry.test" || fmt.Sprint(d.Port) != port || d.Address != "127.0.0.1" || d.Connections != 1 || d.BytesDown < int64(len(body)) || d.BytesUp < 50 {
		t.Fatalf("destination %+v", d)
	}
}

func TestProxyConnectTunnelCounts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an echo server that answers twice what it got
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		c.Write(append(b, b...))
	}()
	port := portOf(t, ln.Addr().String())
	p, paddr := startProxy(t, []string{"*.mirror.test:" + port}, Options{Hosts: pin("a.mirror.test")})
	c, err := net.Dial("tcp", paddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The first payload bytes travel with the CONNECT head.
	fmt.Fprintf(c, "CONNECT a.mirror.test:%s HTTP/1.1\r\nHost: a.mirror.test:%s\r\n\r\nhello", port, port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	io.WriteString(c, " world")
	c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(br)
	if string(got) != "hello worldhello world" {
		t.Fatalf("tunnel answered %q", got)
	}
	c.Close()
	p.Close() // waits for the relay to finish counting
	d := p.Summary().Destinations
	if len(d) != 1 || d[0].BytesUp != 11 || d[0].BytesDown != 22 {
		t.Fatalf("destinations %+v, want 11 bytes up and 22 down", d)
	}
}

// connect sends CONNECT host:port through the proxy and returns the status
// and the refusal reason header.
func connect(t *testing.T, paddr, target string) (int, string, string) {
	t.Helper()
	c, err := net.Dial("tcp", paddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Termd-Egress-Refused"), string(b)
}

type fixedResolver map[string][]netip.Addr

func (f fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestProxyRefusals(t *testing.T) {
	var mu sync.Mutex
	var live []receipt.EgressRefusal
	res := fixedResolver{
		"inside.test":   {netip.MustParseAddr("10.0.0.5")},
		"meta.test":     {netip.MustParseAddr("169.254.169.254")},
		"listedip.test": {netip.MustParseAddr("10.9.9.9")},
	}
	p, paddr := startProxy(t, []string{"inside.test", "meta.test", "localhost", "nowhere.test", "only443.test", "listedip.test:*", "10.9.9.9:1"},
		Options{Resolver: res, OnRefuse: func(r receipt.EgressRefusal) { mu.Lock(); live = append(live, r); mu.Unlock() }})
	cases := []struct {
		target, reason, says string
		code                 int
	}{
		{"unlisted.test:443", ReasonNotListed, `unlisted.test is not on allow-list "test"`, 403},
		{"unlisted.test:443", ReasonNotListed, "", 403}, // counted, reported once
		{"127.0.0.1:443", ReasonIPLiteral, "is an IP address", 403},
		{"[::1]:443", ReasonIPLiteral, "is an IP address", 403},
		{"inside.test:443", ReasonPrivateAddress, "resolves to 10.0.0.5", 403},
		{"meta.test:80", ReasonPrivateAddress, "169.254.169.254", 403},
		{"only443.test:22", ReasonPortNotListed, "names only443.test but not port 22", 403},
		{"inside.test:22", ReasonPortNotListed, "not port 22", 403},
		{"nowhere.test:443", ReasonResolveFailed, "no such host", 502},
		{"listedip.test:2", ReasonPrivateAddress, "10.9.9.9", 403}, // the address entry names port 1 only
		{"nocolon", ReasonBadRequest, "want host:port", 400},
	}
	for _, c := range cases {
		code, reason, body := connect(t, paddr, c.target)
		if code != c.code || reason != c.reason || !strings.Contains(body, c.says) {
			t.Errorf("CONNECT %s: %d %q %q; want %d %q containing %q", c.target, code, reason, body, c.code, c.reason, c.says)
		}
	}
	// A plain HTTP request for an unlisted host is refused the same way.
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: paddr})}}
	resp, err := c.Get("http://elsewhere.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("X-Termd-Egress-Refused") != ReasonNotListed {
		t.Errorf("plain http: %d %q", resp.StatusCode, resp.Header.Get("X-Termd-Egress-Refused"))
	}
	s := p.Summary()
	if len(s.Destinations) != 0 {
		t.Errorf("destinations %+v, want none", s.Destinations)
	}
	if s.Refused[0].Host != "unlisted.test" || s.Refused[0].Count != 2 || s.Refused[0].Reason != ReasonNotListed {
		t.Errorf("first refusal %+v", s.Refused[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(live) != len(s.Refused) {
		t.Errorf("%d live refusals, %d in the account: each host, port and reason is reported once", len(live), len(s.Refused))
	}
}

func TestProxyDialsOnlyTheCheckedAddress(t *testing.T) {
	// The resolver answers a private and a public address; only the public
	// one is dialed.
	var dialed []string
	res := fixedResolver{"mixed.test": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("8.8.8.8")}}
	_, paddr := startProxy(t, []string{"mixed.test"}, Options{Resolver: res, Dial: func(ctx context.Context, n, a string) (net.Conn, error) {
		dialed = append(dialed, a)
		return nil, fmt.Errorf("no network in this test")
	}})
	code, reason, _ := connect(t, paddr, "mixed.test:443")
	if code != 502 || reason != ReasonDialFailed {
		t.Errorf("%d %q", code, reason)
	}
	if strings.Join(dialed, ",") != "8.8.8.8:443" {
		t.Errorf("dialed %v, want only the public address", dialed)
	}
}

func TestProxyRefusesLoopbackFromTheSystemResolver(t *testing.T) {
	// localhost, listed by name, resolves (through /etc/hosts) to loopback:
	// refused, since no one named that address.
	_, paddr := startProxy(t, []string{"localhost:*"}, Options{})
	code, reason, body := connect(t, paddr, "localhost:443")
	if code != 403 || reason != ReasonPrivateAddress || !strings.Contains(body, "not a public address") {
		t.Errorf("localhost: %d %q %q", code, reason, body)
	}
}

// Past MaxConns a connection is refused (and counted); Close ends a tunnel
// that is still open.
func TestProxyConnectionBoundAndClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // holds every connection open
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	port := portOf(t, ln.Addr().String())
	p, paddr := startProxy(t, []string{"held.test:" + port}, Options{Hosts: pin("held.test"), MaxConns: 1})
	c, err := net.Dial("tcp", paddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT held.test:%s HTTP/1.1\r\nHost: held.test:%s\r\n\r\n", port, port)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first tunnel: %v %v", resp, err)
	}
	if code, reason, _ := connect(t, paddr, "held.test:"+port); code != 503 || reason != ReasonBusy {
		t.Errorf("second connection with MaxConns 1: %d %q", code, reason)
	}
	p.Close() // must end the open tunnel, not wait for it
	if _, err := br.ReadByte(); err == nil {
		t.Error("the tunnel stayed open after Close")
	}
	if r := p.Summary().Refused; len(r) != 1 || r[0].Reason != ReasonBusy {
		t.Errorf("refusals %+v", r)
	}
}
