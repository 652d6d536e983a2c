package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"
)

// tickets are one-time, short-lived credentials for the SSE route: a
// browser's EventSource cannot send an Authorization header, and the bearer
// token itself must never appear in a URL (logs, history, Referer).
type tickets struct {
	mu  sync.Mutex
	ttl time.Duration
	m   map[string]ticket
}

type ticket struct {
	scope   string
	expires time.Time
}

func newTickets(ttl time.Duration) *tickets {
	return &tickets{ttl: ttl, m: map[string]ticket{}}
}

func (t *tickets) issue(scope string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.m {
		if now.After(v.expires) {
			delete(t.m, k)
		}
	}
	t.m[id] = ticket{scope: scope, expires: now.Add(t.ttl)}
	return id
}

// redeem returns the scope a ticket was issued to and forgets it, or "" when
// it is unknown, used or expired.
func (t *tickets) redeem(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[id]
	if !ok {
		return ""
	}
	delete(t.m, id)
	if time.Now().After(v.expires) {
		return ""
	}
	return v.scope
}
