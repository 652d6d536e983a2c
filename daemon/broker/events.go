package broker

import (
	"context"
	"errors"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// acquireStream counts an open event stream against the caller's cap.
func (b *Broker) acquireStream(caller *termdv1.Principal) (release func(), err error) {
	key := domain.PrincipalKey(caller)
	b.mu.Lock()
	defer b.unlock()
	if max := b.Config().Sessions.MaxStreams; b.streams[key] >= max {
		return nil, errdefs.Exhausted("you have %d event streams open (sessions.max_streams); close some (e.g. other `termctl watch` or console tabs)", b.streams[key])
	}
	b.streams[key]++
	return func() {
		b.mu.Lock()
		if b.streams[key]--; b.streams[key] <= 0 {
			delete(b.streams, key)
		}
		b.unlock()
	}, nil
}

// StreamEvents delivers a session's events (or every visible session's)
// after since, until the session closes or ctx ends. since 0 starts at the
// oldest event still held with history, else at "now" (the next event).
// ready, when set, is called once the starting point is fixed: a transport
// tells its client then that "now" has begun.
func (b *Broker) StreamEvents(ctx context.Context, caller *termdv1.Principal, sessionID string, since uint64, history bool, ready func(), send func(*termdv1.Event) error) error {
	release, err := b.acquireStream(caller)
	if err != nil {
		return err
	}
	defer release()
	var sub *events.Subscription
	if sessionID != "" {
		if err := b.checkSession(caller, sessionID); err != nil {
			return err
		}
		if since == 0 && !history {
			since = b.Bus.LastSeq(sessionID)
		}
		sub, err = b.Bus.Subscribe(sessionID, since)
		if err != nil {
			return errdefs.NotFound("session %s has no events (it may have been closed long ago)", sessionID)
		}
	} else {
		if since == 0 && !history {
			since = b.Bus.LastGlobalSeq()
		}
		sub = b.Bus.SubscribeAll(since, func(id string) bool {
			b.mu.Lock()
			defer b.unlock()
			s, ok := b.sessions[id]
			return ok && domain.Visible(caller, s.owner)
		})
	}
	defer sub.Close()
	if ready != nil {
		ready()
	}
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
