package mcpbridge

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// sessionPool maps MCP clients to daemon sessions. Each MCP client (an MCP
// session; all stateless 2026-07-28 requests count as one client) gets its
// own daemon session, created on its first plan, released when the client
// goes away (closed if nothing is pending in it) and never shared with
// another client. At most max are held: at the cap the least recently used
// idle one is closed to make room, and when every one holds pending work a
// new client is refused, naming --max-sessions.
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
	if len(p.byKey) >= p.max && !p.reclaimLocked(ctx) {
		return "", fmt.Errorf("termd-mcp already holds %d daemon sessions for its other clients, each with work pending (--max-sessions %d). Next: finish or cancel their plans, or ask the user to raise --max-sessions", len(p.byKey), p.max)
	}
	created, err := p.c.CreateSession(ctx, label)
	if err != nil {
		return "", err
	}
	s := &pooled{id: created.GetId(), used: time.Now()}
	p.byKey[key] = s
	return s.id, nil
}

// reclaimLocked closes the least recently used daemon session that has
// nothing pending, dropping its client's key (that client gets a new one on
// its next plan).
func (p *sessionPool) reclaimLocked(ctx context.Context) bool {
	keys := make([]string, 0, len(p.byKey))
	for k := range p.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return p.byKey[keys[i]].used.Before(p.byKey[keys[j]].used) })
	for _, k := range keys {
		if p.closeIfIdle(ctx, p.byKey[k].id) {
			delete(p.byKey, k)
			return true
		}
	}
	return false
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

// release is called when an MCP client goes away: its daemon session is
// closed if nothing is pending in it, and kept (until it expires, or the
// daemon reclaims it) otherwise, so that a plan approved later can still be
// run from another client.
func (p *sessionPool) release(ctx context.Context, key string) bool {
	p.mu.Lock()
	s, ok := p.byKey[key]
	delete(p.byKey, key)
	p.mu.Unlock()
	return ok && p.closeIfIdle(ctx, s.id)
}

// closeIdle releases every client's session (the bridge is exiting).
// Without this every bridge process left a session behind, and a client
// restarted eight times hit the per-principal session cap.
func (p *sessionPool) closeIdle(ctx context.Context) (closed int) {
	p.mu.Lock()
	keys := make([]string, 0, len(p.byKey))
	for k := range p.byKey {
		keys = append(keys, k)
	}
	p.mu.Unlock()
	for _, k := range keys {
		if p.release(ctx, k) {
			closed++
		}
	}
	return closed
}

// closeIfIdle closes a daemon session that holds nothing a person or agent
// may still want: no running execution and no plan that is planned,
// awaiting approval or approved.
func (p *sessionPool) closeIfIdle(ctx context.Context, id string) bool {
	s, err := p.c.Session(ctx, id)
	if err != nil {
		return sessionGone(err) // gone already: nothing to keep
	}
	if s.GetClosed() {
		return true
	}
	if s.GetActiveExecutionId() != "" {
		return false
	}
	pending, err := p.c.Plans.ListPlans(ctx, &termdv1.ListPlansRequest{SessionId: id, Limit: 1, States: []termdv1.PlanState{
		termdv1.PlanState_PLAN_STATE_PLANNED, termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL, termdv1.PlanState_PLAN_STATE_APPROVED}})
	if err != nil || len(pending.GetPlans()) > 0 {
		return false
	}
	_, err = p.c.Sessions.CloseSession(ctx, &termdv1.CloseSessionRequest{SessionId: id})
	return err == nil
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

// sessionFull reports whether err says a session holds as many plans as
// it may (sessions.max_plans), so plans go on in a fresh one.
func sessionFull(err error) bool {
	return client.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "sessions.max_plans")
}
