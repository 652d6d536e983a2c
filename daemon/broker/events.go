package broker

import (
	"context"
	"errors"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// StreamEvents delivers a session's events (or every visible session's)
// after since, until the session closes or ctx ends.
func (b *Broker) StreamEvents(ctx context.Context, caller *termdv1.Principal, sessionID string, since uint64, send func(*termdv1.Event) error) error {
	var sub *events.Subscription
	if sessionID != "" {
		b.mu.Lock()
		_, err := b.sessionLocked(caller, sessionID)
		b.mu.Unlock()
		if err != nil {
			return err
		}
		sub, err = b.Bus.Subscribe(sessionID, since)
		if err != nil {
			return errdefs.NotFound("session %s has no events (it may have been closed long ago)", sessionID)
		}
	} else {
		sub = b.Bus.SubscribeAll(since, func(id string) bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			s, ok := b.sessions[id]
			return ok && visible(caller, s.owner)
		})
	}
	defer sub.Close()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		}
		if err := send(ev); err != nil {
			return err
		}
	}
}

// Subscribers counts live event subscribers (metrics, leak checks).
func (b *Broker) Subscribers() int { return b.Bus.Subscribers() }
