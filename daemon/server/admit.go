package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/termd/termd/daemon/config"
)

// admission decides at accept time, before any HTTP/2 work, whether a
// connection may stay: its uid must hold a role, and its uid (and, for
// non-operators, everyone together) must be under the connection caps. A
// caller that floods the socket therefore exhausts only its own share of
// descriptors and memory.
type admission struct {
	s *Server

	mu      sync.Mutex
	perUID  map[string]int // by uid ("uid:N") or, on TCP, source address ("ip:ADDR")
	others  int            // connections of non-operators (every TCP connection)
	rate    map[string]*bucket
	total   atomic.Int64
	refused atomic.Int64
}

// bucket holds the new connections a uid may still open (a token bucket
// refilled at connections.accept_rate a second, up to connections.per_uid).
type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds the rate map: past it, full buckets are forgotten.
const maxBuckets = 4096

func newAdmission(s *Server) *admission {
	return &admission{s: s, perUID: map[string]int{}, rate: map[string]*bucket{}}
}

// overRate takes one new connection from uid's bucket, or reports that the
// uid has opened connections faster than connections.accept_rate. a.mu is held.
func (a *admission) overRate(uid string, lim config.Connections, now time.Time) bool {
	b := a.rate[uid]
	if b == nil {
		if len(a.rate) >= maxBuckets {
			for u, old := range a.rate {
				if old.tokens+now.Sub(old.last).Seconds()*float64(lim.AcceptRate) >= float64(lim.PerUID) {
					delete(a.rate, u)
				}
			}
		}
		b = &bucket{tokens: float64(lim.PerUID), last: now}
		a.rate[uid] = b
	}
	b.tokens = min(float64(lim.PerUID), b.tokens+now.Sub(b.last).Seconds()*float64(lim.AcceptRate))
	b.last = now
	if b.tokens < 1 {
		return true
	}
	b.tokens--
	return false
}

// admit counts the connection in, or returns why it is refused; quiet says
// the refusal is of a uid connecting in a loop, closed without a word.
func (a *admission) admit(info PeerInfo) (operator bool, refusal string, quiet bool) {
	cfg := a.s.cfg()
	role := cfg.RoleOf(info.UID, info.GID)
	if role == config.RoleNone {
		return false, fmt.Sprintf("uid %d has no role in termd's config (add it to roles.operators, roles.agents or roles.viewers)", info.UID), false
	}
	operator = role == config.RoleOperator
	lim := cfg.Connections
	a.mu.Lock()
	defer a.mu.Unlock()
	key := uidKey(info.UID)
	if a.perUID[key] >= lim.PerUID {
		return operator, fmt.Sprintf("uid %d already holds %d connections to termd (connections.per_uid); close some, or raise connections.per_uid in termd's config", info.UID, lim.PerUID), false
	}
	if !operator && a.others >= lim.Global {
		return operator, fmt.Sprintf("termd already serves %d connections (connections.global); try again later, or raise connections.global in termd's config", lim.Global), false
	}
	// Checked last, so only connections that would be admitted use up
	// the uid's rate (a uid at its per_uid cap is told that instead).
	if !operator && a.overRate(key, lim, time.Now()) {
		return operator, fmt.Sprintf("uid %d opens new connections to termd faster than %d a second (connections.accept_rate); reuse a connection, or raise connections.accept_rate in termd's config", info.UID, lim.AcceptRate), true
	}
	a.perUID[key]++
	if !operator {
		a.others++
	}
	a.total.Add(1)
	return operator, "", false
}

func uidKey(uid uint32) string { return "uid:" + strconv.FormatUint(uint64(uid), 10) }

// admitTCP counts in a connection to the mutual-TLS listener before its
// handshake: who it is is not known yet, so its source address stands in
// for the uid (connections.per_uid and accept_rate apply to it) and every
// TCP connection counts against connections.global.
func (a *admission) admitTCP(addr net.Addr) (key, refusal string) {
	host := addr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	key = "ip:" + host
	lim := a.s.cfg().Connections
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.perUID[key] >= lim.PerUID:
		return key, fmt.Sprintf("%s already holds %d connections to termd (connections.per_uid)", host, lim.PerUID)
	case a.others >= lim.Global:
		return key, fmt.Sprintf("termd already serves %d connections (connections.global)", lim.Global)
	case a.overRate(key, lim, time.Now()):
		return key, fmt.Sprintf("%s opens new connections faster than %d a second (connections.accept_rate)", host, lim.AcceptRate)
	}
	a.perUID[key]++
	a.others++
	a.total.Add(1)
	return key, ""
}

func (a *admission) releaseKey(key string, operator bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.perUID[key]--; a.perUID[key] <= 0 {
		delete(a.perUID, key)
	}
	if !operator {
		a.others--
	}
	a.total.Add(-1)
}

// admittedListener applies the admission to every accepted connection.
type admittedListener struct {
	net.Listener
	a   *admission
	log func(msg string, args ...any)
}

func (l *admittedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			tc, ok := c.(*net.TCPConn)
			if !ok {
				return c, nil // the transport credentials refuse it
			}
			key, why := l.a.admitTCP(tc.RemoteAddr())
			if why != "" {
				// No HTTP/2 refusal on TCP: the client speaks TLS first.
				if l.a.refused.Add(1)%1000 == 1 {
					l.log("refused a TLS connection", "remote", tc.RemoteAddr().String(), "reason", why, "refused_so_far", l.a.refused.Load())
				}
				tc.Close()
				continue
			}
			return &tcpConn{TCPConn: tc, key: key, a: l.a}, nil
		}
		info, err := readPeer(uc)
		if err != nil {
			c.Close()
			continue
		}
		operator, why, quiet := l.a.admit(info)
		if why != "" {
			if l.a.refused.Add(1)%1000 == 1 { // a flood must not flood the log too
				l.log("refused a connection", "uid", info.UID, "pid", info.PID, "reason", why, "refused_so_far", l.a.refused.Load())
			}
			if quiet && lingering.Load() >= maxLingering/2 {
				// A uid connecting in a loop: its connections cost termd
				// an accept and a close, no more, while many are refused.
				uc.Close()
				continue
			}
			refuse(uc, why)
			continue
		}
		return &admittedConn{UnixConn: uc, info: info, operator: operator, a: l.a}, nil
	}
}

// lingering counts refused connections kept half-open so their client can
// read why; past maxLingering a refusal closes at once, without the reason.
var lingering atomic.Int64

const maxLingering = 64

// refuse tells the client why in an HTTP/2 GOAWAY (gRPC clients show its
// text in their error) and closes the connection. termd parses nothing the
// client sends: it discards up to a few KiB for at most a second, so the
// client's preface write succeeds and it reads the GOAWAY.
func refuse(c *net.UnixConn, why string) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	_ = fr.WriteSettings()
	_ = fr.WriteGoAway(0, http2.ErrCodeRefusedStream, []byte(why))
	_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	_, _ = c.Write(buf.Bytes())
	if lingering.Add(1) > maxLingering {
		lingering.Add(-1)
		_ = c.Close()
		return
	}
	_ = c.CloseWrite()
	go func() {
		defer lingering.Add(-1)
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.CopyN(io.Discard, c, 16<<10)
		_ = c.Close()
	}()
}

// admittedConn is a connection counted against its uid until it closes.
type admittedConn struct {
	*net.UnixConn
	info     PeerInfo
	operator bool
	a        *admission
	once     sync.Once
}

func (c *admittedConn) Close() error {
	c.once.Do(func() { c.a.releaseKey(uidKey(c.info.UID), c.operator) })
	return c.UnixConn.Close()
}

// tcpConn is a connection to the mutual-TLS listener, counted against its
// source address until it closes.
type tcpConn struct {
	*net.TCPConn
	key  string
	a    *admission
	once sync.Once
}

func (c *tcpConn) Close() error {
	c.once.Do(func() { c.a.releaseKey(c.key, false) })
	return c.TCPConn.Close()
}
