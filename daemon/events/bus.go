// Package events is the daemon's per-session event bus.
//
// Every event published to a session gets the next per-session sequence
// number (Event.seq: 1, 2, 3, ... per session) and the next daemon-wide one
// (Event.global_seq). The bus keeps, per session and for the whole daemon, a
// ring of recent events bounded by count and by bytes; subscribers read from
// those rings through a cursor, so:
//
//   - Publish never waits for a subscriber: it appends to two rings and pokes
//     each interested subscriber's 1-slot notify channel without blocking.
//     It costs O(subscribers of that session + all-sessions subscribers).
//   - Memory is bounded by the rings whatever the subscribers do; a
//     subscriber holds no queue of its own.
//   - A subscriber that falls behind the ring is not silently skipped ahead:
//     Next returns one synthesized EVENT_KIND_LAGGED event saying exactly
//     which sequence numbers it missed, then continues with the oldest event
//     still held.
//   - Subscribing with a since sequence number replays the ring after it, so
//     resuming after a reconnect (SSE Last-Event-ID, termctl watch) is the
//     same code path as falling behind.
//
// # Lagged events
//
// For a session subscription whose cursor (the last seq it was given, or
// its since_seq) is C while the oldest event the ring still holds has seq F,
// with F > C+1, Next returns:
//
//	Event{
//	  Kind:      EVENT_KIND_LAGGED,
//	  SessionId: <session>,
//	  Seq:       F-1,             // = C + dropped: the last missed seq
//	  GlobalSeq: 0,
//	  Time:      now,
//	  Payload:   Lagged{ResumeFromSeq: C, Dropped: F-1-C},
//	}
//
// i.e. the events with seq C+1 ... C+dropped are lost to this subscriber, and
// the next event Next returns has seq C+dropped+1 (= F). The LAGGED event's
// Seq is the last missed seq, so the seqs a subscriber sees are strictly
// increasing and a client that records the LAGGED event's Seq as its
// Last-Event-ID resumes at the oldest held event without being told about the
// same gap twice; one that resumes from ResumeFromSeq is told again.
//
// For an all-sessions subscription the same holds with global sequence
// numbers: Seq is 0, SessionId is "", GlobalSeq is the last missed global
// seq, Lagged.ResumeFromSeq is the global cursor (which also advances past
// events the predicate hid, so it may be above the last global_seq the
// caller was given) and Lagged.Dropped counts
// global sequence numbers, including those of sessions the caller may not see
// (it cannot be known which were visible, since they are gone). A LAGGED event
// is delivered regardless of the visibility predicate.
//
// # Closed sessions
//
// CloseSession marks a session closed (it publishes nothing itself; the
// caller publishes EVENT_KIND_SESSION_CLOSED first). Later Publish calls to it
// are ignored and return nil. Its subscribers receive every event still held
// up to the last one, then io.EOF. Once a closed session has no subscribers,
// its ring is trimmed to the last Options.ClosedSessionTail events (and to
// Options.ClosedSessionTailBytes, its newest event kept), and the
// bus remembers at most Options.ClosedSessions closed sessions (oldest
// forgotten first); a forgotten session is unknown to Subscribe, and a Publish
// to its id would start a new session at seq 1 (session ids are never
// reused by the daemon).
//
// # Memory
//
// Event sizes are accounted as the Go heap the event holds (heapSize: its
// messages' structs, strings, bytes and lists) plus its ring slot, not its
// encoded length, which counts a plan's event at less than half of what it
// holds. Each ring holds at most its event count and at most its
// byte budget, except that the newest event is always kept. The session rings
// and the global ring share the same *Event values, so the real footprint is
// at most the sum of the live sessions' rings, the closed sessions' tails and
// the global ring.
package events

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	termdv1 "github.com/termd/termd/proto/termd/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Defaults for zero (or negative) Options fields.
const (
	DefaultSessionRingEvents = 4096
	DefaultSessionRingBytes  = 4 << 20
	DefaultGlobalRingEvents  = 8192
	DefaultGlobalRingBytes   = 16 << 20
	DefaultClosedSessionTail = 16
	DefaultClosedSessions    = 1024
	// DefaultClosedSessionTailBytes holds a closed session's tail to about
	// sixteen plans' events (~3.4 KB each) but not to sixteen of its last
	// output events (up to 512 KiB each).
	DefaultClosedSessionTailBytes = 64 << 10
)

// slotBytes is a ring slot's own size, added to an event's heapSize.
const slotBytes = 16

// accountedSize is what an event counts against a ring's byte budget.
func accountedSize(ev *termdv1.Event) int { return heapSize(ev.ProtoReflect()) + slotBytes }

var (
	// ErrUnknownSession is returned by Subscribe for a session the bus has no
	// record of (never published to, or closed and forgotten).
	ErrUnknownSession = errors.New("events: unknown session")
	// ErrClosed is returned by Next after the Subscription was closed.
	ErrClosed = errors.New("events: subscription closed")
)

// Options bounds the bus's memory. Zero or negative fields take defaults.
type Options struct {
	SessionRingEvents int // events kept per session (default 4096)
	SessionRingBytes  int // accounted bytes kept per session (default 4 MiB)
	GlobalRingEvents  int // events kept daemon-wide (default 8192)
	GlobalRingBytes   int // accounted bytes kept daemon-wide (default 16 MiB)
	// ClosedSessionTail is how many of its last events a closed session
	// keeps once it has no subscribers (default 16; negative means 0).
	ClosedSessionTail int
	// ClosedSessionTailBytes bounds the accounted bytes of that tail (default
	// 64 KiB; its newest event is kept whatever its size).
	ClosedSessionTailBytes int
	// ClosedSessions is how many closed sessions the bus remembers
	// (default 1024).
	ClosedSessions int
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.SessionRingEvents, DefaultSessionRingEvents)
	def(&o.SessionRingBytes, DefaultSessionRingBytes)
	def(&o.GlobalRingEvents, DefaultGlobalRingEvents)
	def(&o.GlobalRingBytes, DefaultGlobalRingBytes)
	def(&o.ClosedSessions, DefaultClosedSessions)
	def(&o.ClosedSessionTailBytes, DefaultClosedSessionTailBytes)
	switch {
	case o.ClosedSessionTail == 0:
		o.ClosedSessionTail = DefaultClosedSessionTail
	case o.ClosedSessionTail < 0:
		o.ClosedSessionTail = 0
	}
	return o
}

// Bus is the event bus. It is safe for concurrent use.
type Bus struct {
	opts Options

	mu        sync.Mutex
	sessions  map[string]*session
	closedIDs []*session // closed sessions, oldest first, for forgetting
	global    *ring
	globalSeq uint64
	allSubs   []*Subscription
	nsubs     int
}

type session struct {
	id      string
	ring    *ring
	lastSeq uint64
	closed  bool
	subs    []*Subscription
}

// New returns an empty bus.
func New(opts Options) *Bus {
	opts = opts.withDefaults()
	return &Bus{
		opts:     opts,
		sessions: make(map[string]*session),
		global:   newRing(opts.GlobalRingEvents, opts.GlobalRingBytes),
	}
}

// Publish appends an event to a session, creating the session on its first
// event. It assigns Seq, GlobalSeq, Time, SessionId and Kind; fill (may be
// nil) sets the payload and is called before the bus lock is taken. It
// returns the stored event, which is shared with subscribers and must be
// treated as immutable, or nil if the session is closed.
//
// Publish never blocks on subscribers.
func (b *Bus) Publish(sessionID string, kind termdv1.EventKind, fill func(e *termdv1.Event)) *termdv1.Event {
	ev := &termdv1.Event{SessionId: sessionID, Kind: kind}
	if fill != nil {
		fill(ev)
	}
	ev.SessionId, ev.Kind = sessionID, kind
	ev.Time = &timestamppb.Timestamp{}
	size := accountedSize(ev)

	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessionLocked(sessionID)
	if s.closed {
		return nil
	}
	b.globalSeq++
	s.lastSeq++
	ev.Seq, ev.GlobalSeq = s.lastSeq, b.globalSeq
	now := time.Now() // under the lock: time order follows global_seq order
	ev.Time.Seconds, ev.Time.Nanos = now.Unix(), int32(now.Nanosecond())
	s.ring.push(ev, ev.Seq, size)
	b.global.push(ev, ev.GlobalSeq, size)
	for _, sub := range s.subs {
		sub.poke()
	}
	for _, sub := range b.allSubs {
		sub.poke()
	}
	return ev
}

// sessionLocked is the session sessionID, made (empty, open) when the bus has
// none by that id. b.mu is held.
func (b *Bus) sessionLocked(sessionID string) *session {
	s := b.sessions[sessionID]
	if s == nil {
		s = &session{id: sessionID, ring: newRing(b.opts.SessionRingEvents, b.opts.SessionRingBytes)}
		b.sessions[sessionID] = s
	}
	return s
}

// CloseSession marks a session closed; see the package comment. Closing an
// unknown session records it as closed (so later Publish calls are ignored);
// closing twice is a no-op.
func (b *Bus) CloseSession(sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessionLocked(sessionID)
	if s.closed {
		return
	}
	s.closed = true
	for _, sub := range s.subs {
		sub.poke()
	}
	if len(s.subs) == 0 {
		s.ring.trim(b.opts.ClosedSessionTail, b.opts.ClosedSessionTailBytes)
	}
	b.closedIDs = append(b.closedIDs, s)
	for len(b.closedIDs) > b.opts.ClosedSessions {
		old := b.closedIDs[0]
		b.closedIDs[0] = nil
		b.closedIDs = b.closedIDs[1:]
		if b.sessions[old.id] == old {
			delete(b.sessions, old.id)
		}
	}
}

// Subscribe follows one session, starting after sinceSeq (0: from the first
// event still held; a LAGGED event comes first if seq 1 is no longer held).
// A sinceSeq beyond the session's last seq is taken as its last seq (from
// now on), so a stale cursor never silently skips future events. A closed
// session replays what it still holds, then Next returns io.EOF.
func (b *Bus) Subscribe(sessionID string, sinceSeq uint64) (*Subscription, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[sessionID]
	if s == nil {
		return nil, ErrUnknownSession
	}
	sub := newSubscription(b, s, min(sinceSeq, s.lastSeq), nil)
	sub.idx = len(s.subs)
	s.subs = append(s.subs, sub)
	b.nsubs++
	return sub, nil
}

// SubscribeAll follows every session, in global_seq order, starting after
// sinceGlobalSeq (clamped to the current global seq like Subscribe; 0
// replays the global ring, after a LAGGED event if global seq 1 is no longer
// held — pass LastGlobalSeq() to follow only new events). Only
// events whose session id satisfies visible are returned (visible == nil
// sees everything); visible is called from Next, outside the bus lock. The
// stream never ends by itself.
func (b *Bus) SubscribeAll(sinceGlobalSeq uint64, visible func(sessionID string) bool) *Subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	sub := newSubscription(b, nil, min(sinceGlobalSeq, b.globalSeq), visible)
	sub.idx = len(b.allSubs)
	b.allSubs = append(b.allSubs, sub)
	b.nsubs++
	return sub
}

// Subscribers returns the number of live (not closed) subscriptions.
func (b *Bus) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nsubs
}

// LastSeq returns the seq of the last event published to a session, or 0 if
// the session is unknown or has none.
func (b *Bus) LastSeq(sessionID string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.sessions[sessionID]; s != nil {
		return s.lastSeq
	}
	return 0
}

// LastGlobalSeq returns the global_seq of the last event published.
func (b *Bus) LastGlobalSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.globalSeq
}

// removeSub unlinks sub; b.mu is held.
func removeSub(list []*Subscription, sub *Subscription) []*Subscription {
	last := len(list) - 1
	if sub.idx < 0 || sub.idx > last || list[sub.idx] != sub {
		return list
	}
	list[sub.idx] = list[last]
	list[sub.idx].idx = sub.idx
	list[last] = nil
	sub.idx = -1
	return list[:last]
}

// Subscription is a cursor over a session's events or over all sessions'.
// Next must not be called concurrently with itself; Close may be called from
// any goroutine at any time, including while Next is blocked.
type Subscription struct {
	bus     *Bus
	sess    *session // nil: all sessions
	visible func(string) bool
	notify  chan struct{} // 1 slot: "something happened"
	done    chan struct{} // closed by Close
	once    sync.Once

	// Guarded by bus.mu.
	idx    int
	closed bool

	// Owned by the goroutine calling Next.
	cursor uint64 // last seq (global seq for all-sessions) delivered
}

func newSubscription(b *Bus, s *session, cursor uint64, visible func(string) bool) *Subscription {
	return &Subscription{
		bus:     b,
		sess:    s,
		visible: visible,
		cursor:  cursor,
		notify:  make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
}

func (s *Subscription) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next returns the next event after the subscription's cursor, blocking
// until one is published. It returns a synthesized LAGGED event if the ring
// no longer holds the next one (see the package comment); io.EOF once a
// closed session's events are all delivered; ctx.Err() when ctx ends (the
// subscription stays usable: the caller still owns Close); ErrClosed after
// Close.
func (s *Subscription) Next(ctx context.Context) (*termdv1.Event, error) {
	return s.NextUntil(ctx, nil)
}

// NextUntil is Next that also returns (nil, nil) when expired delivers
// first (nil: never), so a reader can hold what it read for a while and
// still be woken for the next event.
func (s *Subscription) NextUntil(ctx context.Context, expired <-chan time.Time) (*termdv1.Event, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ev, eof, err := s.step()
		if err != nil {
			return nil, err
		}
		if ev != nil {
			if s.sess == nil && ev.Kind != termdv1.EventKind_EVENT_KIND_LAGGED &&
				s.visible != nil && !s.visible(ev.SessionId) {
				continue
			}
			return ev, nil
		}
		if eof {
			return nil, io.EOF
		}
		select {
		case <-s.notify:
		case <-s.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-expired:
			return nil, nil
		}
	}
}

// step takes the next event after the cursor, if any, and advances it.
func (s *Subscription) step() (ev *termdv1.Event, eof bool, err error) {
	b := s.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.closed {
		return nil, false, ErrClosed
	}
	r, last := b.global, b.globalSeq
	if s.sess != nil {
		r, last = s.sess.ring, s.sess.lastSeq
	}
	if s.cursor >= last {
		return nil, s.sess != nil && s.sess.closed, nil
	}
	if oldest := r.oldest(last); s.cursor+1 < oldest {
		ev = s.lagged(oldest - 1)
		s.cursor = oldest - 1
		return ev, false, nil
	}
	s.cursor++
	return r.get(s.cursor), false, nil
}

// lagged builds the LAGGED event for a jump of the cursor to lastMissed.
func (s *Subscription) lagged(lastMissed uint64) *termdv1.Event {
	ev := &termdv1.Event{
		Kind: termdv1.EventKind_EVENT_KIND_LAGGED,
		Time: timestamppb.Now(),
		Payload: &termdv1.Event_Lagged{Lagged: &termdv1.Lagged{
			ResumeFromSeq: s.cursor,
			Dropped:       lastMissed - s.cursor,
		}},
	}
	if s.sess != nil {
		ev.SessionId, ev.Seq = s.sess.id, lastMissed
	} else {
		ev.GlobalSeq = lastMissed
	}
	return ev
}

// Close removes the subscription from the bus and makes a blocked or later
// Next return ErrClosed. It is idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() {
		b := s.bus
		b.mu.Lock()
		s.closed = true
		if s.sess != nil {
			s.sess.subs = removeSub(s.sess.subs, s)
			if s.sess.closed && len(s.sess.subs) == 0 {
				s.sess.ring.trim(b.opts.ClosedSessionTail, b.opts.ClosedSessionTailBytes)
			}
		} else {
			b.allSubs = removeSub(b.allSubs, s)
		}
		b.nsubs--
		b.mu.Unlock()
		close(s.done)
	})
}
