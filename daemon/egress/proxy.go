package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/termd/termd/receipt"
)

// Resolver looks names up (net.DefaultResolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure one proxy.
type Options struct {
	List *List // the allow-list; required
	// Hosts pins names to addresses (egress.hosts): a pinned name is not
	// looked up, and its address is accepted even when it is not public,
	// since the operator named it.
	Hosts map[string]netip.Addr
	// Resolver resolves names that are not pinned; nil: net.DefaultResolver.
	Resolver Resolver
	// Dial connects to a checked address; nil: a net.Dialer. It runs in the
	// daemon's network namespace (not the execution's).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnRefuse is called the first time each host, port and reason is
	// refused (later ones are only counted), from the connection's
	// goroutine; it must not block for long.
	OnRefuse func(receipt.EgressRefusal)
	// MaxConns bounds concurrent client connections (0: 128).
	MaxConns int
	// HeaderTimeout bounds reading a request's head (0: 30s); DialTimeout
	// bounds one connect (0: 15s).
	HeaderTimeout, DialTimeout time.Duration
}

// Proxy serves one execution (or one namespace's executions): what passes
// through it is counted in its Account.
type Proxy struct {
	o    Options
	acct *Account

	mu     sync.Mutex
	closed bool
	lns    []net.Listener
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	slots  chan struct{}
}

// New returns a proxy for o.
func New(o Options) *Proxy {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 15 * time.Second
	}
	if o.HeaderTimeout == 0 {
		o.HeaderTimeout = 30 * time.Second
	}
	if o.Dial == nil {
		d := &net.Dialer{}
		o.Dial = d.DialContext
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 128
	}
	return &Proxy{o: o, acct: NewAccount(), conns: map[net.Conn]struct{}{}, slots: make(chan struct{}, o.MaxConns)}
}

// Account is what passed through the proxy so far.
func (p *Proxy) Account() *Account { return p.acct }

// Summary is the account as the receipt records it.
func (p *Proxy) Summary() *receipt.Egress { return p.acct.Summary(p.o.List.Name) }

// Serve accepts connections on l until Close; it returns nil after Close.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return nil
	}
	p.lns = append(p.lns, l)
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if !p.track(c) {
			c.Close()
			return nil
		}
		select {
		case p.slots <- struct{}{}:
		default:
			p.refuse(c, nil, "", 0, ReasonBusy, fmt.Sprintf("more than %d connections at once", p.o.MaxConns))
			p.untrack(c)
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { <-p.slots }()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// Close stops the listeners, ends every connection and waits for them.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for _, l := range p.lns {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// hopHeaders are not forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *Proxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(p.o.HeaderTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			p.refuse(c, nil, "", 0, ReasonBadRequest, "unreadable request: "+err.Error())
		}
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if req.Method == http.MethodConnect {
		host, port, perr := splitTarget(req.Host, 0)
		if perr != nil {
			p.refuse(c, req, req.Host, 0, ReasonBadRequest, perr.Error())
			return
		}
		up, ok := p.open(ctx, c, req, host, port)
		if !ok {
			return
		}
		defer up.Close()
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		// Bytes the client sent after its CONNECT head belong upstream.
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			if _, err := up.Write(b); err != nil {
				return
			}
			_, _ = br.Discard(n)
		}
		relay(c, up)
		return
	}
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		p.refuse(c, req, req.Host, 0, ReasonBadRequest, "this is a proxy: send absolute http:// URLs, or CONNECT host:port for https")
		return
	}
	host, port, perr := splitTarget(req.URL.Host, 80)
	if perr != nil {
		p.refuse(c, req, req.URL.Host, 0, ReasonBadRequest, perr.Error())
		return
	}
	up, ok := p.open(ctx, c, req, host, port)
	if !ok {
		return
	}
	defer up.Close()
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.Close = true // one request per upstream connection
	req.RequestURI = ""
	if err := req.Write(up); err != nil {
		writeStatus(c, http.StatusBadGateway, "termd egress: sending the request to "+host+" failed: "+err.Error(), "")
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		writeStatus(c, http.StatusBadGateway, "termd egress: reading the answer of "+host+" failed: "+err.Error(), "")
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		if h != "Transfer-Encoding" {
			resp.Header.Del(h)
		}
	}
	resp.Close = true
	_ = resp.Write(c)
}

// open checks host:port, dials the checked address and counts the
// connection; on refusal it answers the client and returns ok false.
func (p *Proxy) open(ctx context.Context, c net.Conn, req *http.Request, host string, port uint16) (net.Conn, bool) {
	addrs, reason, detail := p.check(ctx, host, port)
	if reason != "" {
		p.refuse(c, req, host, port, reason, detail)
		return nil, false
	}
	var lastErr error
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, p.o.DialTimeout)
		up, err := p.o.Dial(dctx, "tcp", netip.AddrPortFrom(a, port).String())
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		if !p.track(up) { // closing: Close ends upstream connections too
			up.Close()
			return nil, false
		}
		ctr := p.acct.connect(host, port, a.String())
		return &countingConn{Conn: up, ctr: ctr, p: p}, true
	}
	p.refuse(c, req, host, port, ReasonDialFailed, lastErr.Error())
	return nil, false
}

// check decides host:port and returns the addresses that may be dialed.
func (p *Proxy) check(ctx context.Context, host string, port uint16) ([]netip.Addr, string, string) {
	l := p.o.List
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		if !l.AddressListed(a, port) {
			return nil, ReasonIPLiteral, fmt.Sprintf("%s is an IP address; allow-list %q names hosts (add the address to the list to allow it)", a, l.Name)
		}
		return []netip.Addr{a}, "", ""
	}
	if err := checkHostName(host); err != nil {
		return nil, ReasonBadRequest, "host " + strconv.Quote(host) + ": " + err.Error()
	}
	if r := l.CheckName(host, port); r != "" {
		if r == ReasonPortNotListed {
			return nil, r, fmt.Sprintf("allow-list %q names %s but not port %d", l.Name, host, port)
		}
		return nil, r, fmt.Sprintf("%s is not on allow-list %q", host, l.Name)
	}
	if a, ok := p.o.Hosts[host]; ok {
		return []netip.Addr{a.Unmap()}, "", ""
	}
	found, err := p.o.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(found) == 0 {
		msg := "no address"
		if err != nil {
			msg = err.Error()
		}
		return nil, ReasonResolveFailed, msg
	}
	var ok []netip.Addr
	var bad []string
	for _, a := range found {
		a = a.Unmap()
		if Public(a) || l.AddressListed(a, port) {
			ok = append(ok, a)
		} else {
			bad = append(bad, a.String())
		}
	}
	if len(ok) == 0 {
		return nil, ReasonPrivateAddress, fmt.Sprintf("%s resolves to %s, which is not a public address (list the address, or pin the name in egress.hosts, to allow it)", host, strings.Join(bad, ", "))
	}
	return ok, "", ""
}

// refuse records a refusal and answers the client with 403 (or 502 for a
// destination that could not be reached).
func (p *Proxy) refuse(c net.Conn, req *http.Request, host string, port uint16, reason, detail string) {
	host = NormalizeHost(host)
	if p.acct.refuse(host, port, reason, detail) && p.o.OnRefuse != nil {
		p.o.OnRefuse(receipt.EgressRefusal{Host: host, Port: int(port), Reason: reason, Detail: detail, Count: 1})
	}
	code := http.StatusForbidden
	switch reason {
	case ReasonDialFailed, ReasonResolveFailed:
		code = http.StatusBadGateway
	case ReasonBadRequest:
		code = http.StatusBadRequest
	case ReasonBusy:
		code = http.StatusServiceUnavailable
	}
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
	writeStatus(c, code, fmt.Sprintf("termd egress refused %s:%d (%s): %s\n", host, port, reason, detail), reason)
}

func writeStatus(c net.Conn, code int, body, reason string) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n", code, http.StatusText(code), len(body))
	if reason != "" {
		fmt.Fprintf(&b, "X-Termd-Egress-Refused: %s\r\n", reason)
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	_, _ = io.WriteString(c, b.String())
}

// splitTarget parses host[:port] (def: the port when none is given; 0 means
// one is required).
func splitTarget(hp string, def uint16) (string, uint16, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		if def == 0 {
			return "", 0, fmt.Errorf("target %q: want host:port", hp)
		}
		host, ps = hp, strconv.Itoa(int(def))
	}
	n, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || n == 0 || host == "" {
		return "", 0, fmt.Errorf("target %q: want host:port with a port from 1 to 65535", hp)
	}
	return NormalizeHost(host), uint16(n), nil
}

// relay copies both ways until both directions end.
func relay(client, up net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(up, client)
	go cp(client, up)
	<-done
	<-done
}

// countingConn counts bytes to (up) and from (down) a destination; Close
// also stops the proxy tracking it.
type countingConn struct {
	net.Conn
	ctr *destCounter
	p   *Proxy
}

func (c *countingConn) Close() error {
	c.p.mu.Lock()
	delete(c.p.conns, c.Conn)
	c.p.mu.Unlock()
	return c.Conn.Close()
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.ctr != nil {
		c.ctr.down.Add(int64(n))
	}
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.ctr != nil {
		c.ctr.up.Add(int64(n))
	}
	return n, err
}

// CloseWrite half-closes the destination when it is a TCP connection.
func (c *countingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
