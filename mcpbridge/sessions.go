package mcpbridge

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// sessionPool maps MCP clients to daemon sessions. Each MCP client gets one
// daemon session, created on its first plan and reused afterwards; the pool
// is capped so that clients opening MCP session after MCP session cannot
// exhaust the principal's daemon sessions (beyond the cap the least recently
// used one is shared).
type sessionPool struct {
	c   *client.Client
	max int

	mu    sync.Mutex
	byKey map[string]*pooled
}

type pooled struct {
	id   string
	used time.Time
}

func newSessionPool(c *client.Client, max int) *sessionPool {
	return &sessionPool{c: c, max: max, byKey: map[string]*pooled{}}
}

// get returns the daemon session for an MCP client key, creating it once.
func (p *sessionPool) get(ctx context.Context, key, label string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.byKey[key]; ok {
		s.used = time.Now()
		return s.id, nil
	}
	if len(p.byKey) >= p.max {
		var lru *pooled
		for _, s := range p.byKey {
			if lru == nil || s.used.Before(lru.used) {
				lru = s
			}
		}
		lru.used = time.Now()
		p.byKey[key] = lru
		return lru.id, nil
	}
	resp, err := p.c.Sessions.CreateSession(ctx, &termdv1.CreateSessionRequest{Label: label})
	if err != nil {
		return "", err
	}
	s := &pooled{id: resp.GetSession().GetId(), used: time.Now()}
	p.byKey[key] = s
	return s.id, nil
}

// forget drops a daemon session that expired or closed, for every key that
// shared it, so the next plan opens a fresh one.
func (p *sessionPool) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.byKey {
		if s.id == id {
			delete(p.byKey, k)
		}
	}
}

// sessionGone reports whether err says a session no longer exists or is
// closed/expired, so a fresh one may be opened.
func sessionGone(err error) bool {
	switch client.Code(err) {
	case codes.NotFound, codes.FailedPrecondition:
		m := strings.ToLower(err.Error())
		return strings.Contains(m, "session") && (strings.Contains(m, "not found") || strings.Contains(m, "expired") || strings.Contains(m, "closed") || strings.Contains(m, "unknown"))
	}
	return false
}
