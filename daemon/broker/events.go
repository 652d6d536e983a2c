package broker

import (
	"context"

	"github.com/termd/termd/daemon/broker/sessions"
	"github.com/termd/termd/daemon/domain"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// acquireStream counts an open event stream against the caller's cap
// (sessions.Streams, guarded by b.mu).
func (b *Broker) acquireStream(caller *termdv1.Principal) (release func(), err error) {
	key := domain.PrincipalKey(caller)
	b.mu.Lock()
	defer b.unlock()
	if err := b.streams.Acquire(key, b.Config().Sessions.MaxStreams); err != nil {
		return nil, err
	}
	return func() {
		b.mu.Lock()
		b.streams.Release(key)
		b.unlock()
	}, nil
}

// StreamEvents delivers a session's events (or every visible session's)
// after since, until the session closes or ctx ends (sessions.Stream).
func (b *Broker) StreamEvents(ctx context.Context, caller *termdv1.Principal, sessionID string, since uint64, history bool, ready func(), send func(*termdv1.Event) error) error {
	release, err := b.acquireStream(caller)
	if err != nil {
		return err
	}
	defer release()
	if err := b.checkSession(caller, sessionID); err != nil {
		return err
	}
	return sessions.Stream(ctx, b.Bus, sessionID, since, history, func(id string) bool {
		b.mu.Lock()
		defer b.unlock()
		return b.sessions.Visible(caller, id)
	}, ready, send)
}

// Subscribers counts live event subscribers (metrics, leak checks).
func (b *Broker) Subscribers() int { return b.Bus.Subscribers() }
