package sessions

import (
	"context"
	"errors"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Streams counts the open event streams of each principal (by
// domain.PrincipalKey) against sessions.max_streams. Guarded by the
// broker's mutex.
type Streams map[string]int

// Acquire counts one more open stream of key, unless key has max open.
func (st Streams) Acquire(key string, max int) error {
	if st[key] >= max {
		return errdefs.Exhausted("you have %d event streams open (sessions.max_streams); close some (e.g. other `termctl watch` or console tabs)", st[key])
	}
	st[key]++
	return nil
}

// Release counts one stream of key fewer.
func (st Streams) Release(key string) {
	if st[key]--; st[key] <= 0 {
		delete(st, key)
	}
}

// Stream delivers a session's events (or, with sessionID "", the events of
// every session visible says the caller may see) after since, until the
// session closes or ctx ends. since 0 starts at the oldest event still held
// with history, else at "now" (the next event). ready, when set, is called
// once the starting point is fixed: a transport tells its client then that
// "now" has begun. The caller has checked that it may see the session.
func Stream(ctx context.Context, bus *events.Bus, sessionID string, since uint64, history bool, visible func(sessionID string) bool, ready func(), send func(*termdv1.Event) error) error {
	var sub *events.Subscription
	if sessionID != "" {
		if since == 0 && !history {
			since = bus.LastSeq(sessionID)
		}
		var err error
		sub, err = bus.Subscribe(sessionID, since)
		if err != nil {
			return errdefs.NotFound("session %s has no events (it may have been closed long ago)", sessionID)
		}
	} else {
		if since == 0 && !history {
			since = bus.LastGlobalSeq()
		}
		sub = bus.SubscribeAll(since, visible)
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
