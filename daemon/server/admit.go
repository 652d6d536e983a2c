package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
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
	perUID  map[uint32]int
	others  int // connections of non-operators
	total   atomic.Int64
	refused atomic.Int64
}

func newAdmission(s *Server) *admission {
	return &admission{s: s, perUID: map[uint32]int{}}
}

// admit counts the connection in, or returns why it is refused.
func (a *admission) admit(info PeerInfo) (operator bool, refusal string) {
	cfg := a.s.cfg()
	role := cfg.RoleOf(info.UID, info.GID)
	if role == config.RoleNone {
		return false, fmt.Sprintf("uid %d has no role in termd's config (add it to roles.operators, roles.agents or roles.viewers)", info.UID)
	}
	operator = role == config.RoleOperator
	lim := cfg.Connections
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.perUID[info.UID] >= lim.PerUID {
		return operator, fmt.Sprintf("uid %d already holds %d connections to termd (connections.per_uid); close some, or raise connections.per_uid in termd's config", info.UID, lim.PerUID)
	}
	if !operator && a.others >= lim.Global {
		return operator, fmt.Sprintf("termd already serves %d connections (connections.global); try again later, or raise connections.global in termd's config", lim.Global)
	}
	a.perUID[info.UID]++
	if !operator {
		a.others++
	}
	a.total.Add(1)
	return operator, ""
}

func (a *admission) release(info PeerInfo, operator bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.perUID[info.UID]--; a.perUID[info.UID] <= 0 {
		delete(a.perUID, info.UID)
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
			return c, nil // the transport credentials refuse it
		}
		info, err := readPeer(uc)
		if err != nil {
			c.Close()
			continue
		}
		operator, why := l.a.admit(info)
		if why != "" {
			if l.a.refused.Add(1)%1000 == 1 { // a flood must not flood the log too
				l.log("refused a connection", "uid", info.UID, "pid", info.PID, "reason", why, "refused_so_far", l.a.refused.Load())
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
	c.once.Do(func() { c.a.release(c.info, c.operator) })
	return c.UnixConn.Close()
}
