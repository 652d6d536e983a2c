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

// lookup returns the daemon session of an MCP client without creating one.
func (p *sessionPool) lookup(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.byKey[key]
	if !ok {
		return "", false
	}
	return s.id, true
}

// closeIdle closes the daemon sessions this pool opened that hold nothing a
// person or agent may still want: no running execution and no plan that is
// planned, awaiting approval or approved. Those stay open (until they
// expire) so that a plan approved later can still be run from a new bridge.
// Without this every bridge process left a session behind, and a client
// restarted eight times hit the per-principal session cap.
func (p *sessionPool) closeIdle(ctx context.Context) (closed int) {
	p.mu.Lock()
	ids := map[string]bool{}
	for _, s := range p.byKey {
		ids[s.id] = true
	}
	p.byKey = map[string]*pooled{}
	p.mu.Unlock()
	for id := range ids {
		g, err := p.c.Sessions.GetSession(ctx, &termdv1.GetSessionRequest{SessionId: id})
		if err != nil || g.GetSession().GetClosed() || g.GetSession().GetActiveExecutionId() != "" {
			continue
		}
		pending, err := p.c.Plans.ListPlans(ctx, &termdv1.ListPlansRequest{SessionId: id, Limit: 1, States: []termdv1.PlanState{
			termdv1.PlanState_PLAN_STATE_PLANNED, termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL, termdv1.PlanState_PLAN_STATE_APPROVED}})
		if err != nil || len(pending.GetPlans()) > 0 {
			continue
		}
		if _, err := p.c.Sessions.CloseSession(ctx, &termdv1.CloseSessionRequest{SessionId: id}); err == nil {
			closed++
		}
	}
	return closed
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
