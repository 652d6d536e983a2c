package events

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

const (
	kOutput  = termdv1.EventKind_EVENT_KIND_OUTPUT
	kLagged  = termdv1.EventKind_EVENT_KIND_LAGGED
	kCreated = termdv1.EventKind_EVENT_KIND_SESSION_CREATED
	kClosed  = termdv1.EventKind_EVENT_KIND_SESSION_CLOSED
)

// testCtx bounds a test's waits so a bug shows as a failure, not a hang.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func output(n int) func(*termdv1.Event) {
	return func(e *termdv1.Event) {
		e.Payload = &termdv1.Event_Output{Output: &termdv1.OutputChunk{
			ExecutionId: "x1", Data: make([]byte, n),
		}}
	}
}

func next(t *testing.T, ctx context.Context, s *Subscription) *termdv1.Event {
	t.Helper()
	ev, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

// drain reads until io.EOF and returns what it read.
func drain(t *testing.T, ctx context.Context, s *Subscription) []*termdv1.Event {
	t.Helper()
	var out []*termdv1.Event
	for {
		ev, err := s.Next(ctx)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next after %d events: %v", len(out), err)
		}
		out = append(out, ev)
	}
}

func seqs(evs []*termdv1.Event) []uint64 {
	var s []uint64
	for _, e := range evs {
		s = append(s, e.Seq)
	}
	return s
}

func wantSeqs(t *testing.T, evs []*termdv1.Event, from, to uint64) {
	t.Helper()
	if uint64(len(evs)) != to-from+1 {
		t.Fatalf("got seqs %v, want %d..%d", seqs(evs), from, to)
	}
	for i, e := range evs {
		if e.Seq != from+uint64(i) || e.Kind == kLagged {
			t.Fatalf("got seqs %v, want %d..%d", seqs(evs), from, to)
		}
	}
}

func wantLagged(t *testing.T, ev *termdv1.Event, resume, dropped uint64) {
	t.Helper()
	l := ev.GetLagged()
	if ev.Kind != kLagged || l == nil {
		t.Fatalf("want LAGGED, got %v", ev)
	}
	if l.ResumeFromSeq != resume || l.Dropped != dropped {
		t.Fatalf("Lagged{resume_from_seq:%d dropped:%d}, want {%d %d}", l.ResumeFromSeq, l.Dropped, resume, dropped)
	}
}

func TestSeqPerSessionAndGlobal(t *testing.T) {
	b := New(Options{})
	var lastGlobal uint64
	for i := 1; i <= 5; i++ {
		for _, id := range []string{"a", "b", "c"} {
			ev := b.Publish(id, kOutput, func(e *termdv1.Event) {
				e.Seq, e.GlobalSeq, e.SessionId = 999, 999, "forged" // overwritten
				output(3)(e)
			})
			if ev.Seq != uint64(i) {
				t.Fatalf("session %s event %d: seq %d", id, i, ev.Seq)
			}
			if ev.GlobalSeq <= lastGlobal {
				t.Fatalf("global_seq %d after %d", ev.GlobalSeq, lastGlobal)
			}
			lastGlobal = ev.GlobalSeq
			if ev.SessionId != id || ev.Kind != kOutput || ev.Time == nil || len(ev.GetOutput().GetData()) != 3 {
				t.Fatalf("bad event %v", ev)
			}
		}
	}
	if got := b.LastSeq("b"); got != 5 {
		t.Fatalf("LastSeq(b) = %d", got)
	}
	if got := b.LastSeq("nope"); got != 0 {
		t.Fatalf("LastSeq(unknown) = %d", got)
	}
	if got := b.LastGlobalSeq(); got != 15 {
		t.Fatalf("LastGlobalSeq = %d", got)
	}
}

func TestSessionIsolation(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{})
	b.Publish("a", kCreated, nil)
	b.Publish("b", kCreated, nil)
	sa, err := b.Subscribe("a", 0)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Subscribe("b", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		b.Publish("a", kOutput, output(1))
		if i%2 == 0 {
			b.Publish("b", kOutput, output(1))
		}
	}
	b.CloseSession("a")
	b.CloseSession("b")
	ea, eb := drain(t, ctx, sa), drain(t, ctx, sb)
	wantSeqs(t, ea, 1, 11)
	wantSeqs(t, eb, 1, 6)
	for _, e := range ea {
		if e.SessionId != "a" {
			t.Fatalf("subscriber of a got %v", e)
		}
	}
	for _, e := range eb {
		if e.SessionId != "b" {
			t.Fatalf("subscriber of b got %v", e)
		}
	}
}

func TestSubscribeAllVisibility(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{})
	b.Publish("mine", kCreated, nil)   // g1
	b.Publish("theirs", kCreated, nil) // g2
	b.Publish("mine", kOutput, nil)    // g3
	visible := func(id string) bool { return id == "mine" || id == "shared" }

	replay := b.SubscribeAll(0, visible)
	defer replay.Close()
	live := b.SubscribeAll(b.LastGlobalSeq(), visible)
	defer live.Close()
	all := b.SubscribeAll(2, nil)
	defer all.Close()

	b.Publish("theirs", kOutput, nil)  // g4
	b.Publish("shared", kCreated, nil) // g5
	b.Publish("theirs", kOutput, nil)  // g6
	b.Publish("mine", kOutput, nil)    // g7

	check := func(s *Subscription, want []uint64) {
		t.Helper()
		for _, g := range want {
			ev := next(t, ctx, s)
			if ev.GlobalSeq != g {
				t.Fatalf("got global_seq %d (%s), want %d", ev.GlobalSeq, ev.SessionId, g)
			}
			if visible != nil && s.visible != nil && !visible(ev.SessionId) {
				t.Fatalf("invisible session %q delivered", ev.SessionId)
			}
		}
	}
	check(replay, []uint64{1, 3, 5, 7})
	check(live, []uint64{5, 7})
	check(all, []uint64{3, 4, 5, 6, 7})

	// Nothing more is visible: Next blocks until ctx ends, skipping g8.
	b.Publish("theirs", kOutput, nil)
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := live.Next(short); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v, want context.Canceled", err)
	}
	b.Publish("mine", kOutput, nil) // g9
	check(live, []uint64{9})
}

func TestSubscribeUnknownAndClampedSince(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{})
	if _, err := b.Subscribe("ghost", 0); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("Subscribe(unknown) = %v", err)
	}
	for i := 0; i < 3; i++ {
		b.Publish("s", kOutput, nil)
	}
	// A stale cursor from the future means "from now", never "skip until 100".
	s, err := b.Subscribe("s", 100)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all := b.SubscribeAll(100, nil)
	defer all.Close()
	b.Publish("s", kOutput, nil)
	if ev := next(t, ctx, s); ev.Seq != 4 {
		t.Fatalf("got seq %d, want 4", ev.Seq)
	}
	if ev := next(t, ctx, all); ev.GlobalSeq != 4 {
		t.Fatalf("got global_seq %d, want 4", ev.GlobalSeq)
	}
}

func TestResumeFromSinceSeq(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{})
	for i := 0; i < 20; i++ {
		b.Publish("s", kOutput, output(10))
	}
	for _, since := range []uint64{0, 1, 12, 19, 20} {
		s, err := b.Subscribe("s", since)
		if err != nil {
			t.Fatal(err)
		}
		var got []*termdv1.Event
		for uint64(len(got)) < 20-since {
			got = append(got, next(t, ctx, s))
		}
		wantSeqs(t, got, since+1, 20)
		s.Close()
	}
	// Reconnect: read part, drop, resume from the last seen seq.
	s, _ := b.Subscribe("s", 0)
	var last uint64
	for i := 0; i < 7; i++ {
		last = next(t, ctx, s).Seq
	}
	s.Close()
	b.Publish("s", kOutput, nil)
	b.CloseSession("s")
	s2, _ := b.Subscribe("s", last)
	wantSeqs(t, drain(t, ctx, s2), 8, 21)
	s2.Close()
}

func TestLaggedThenOldestHeld(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{SessionRingEvents: 4, GlobalRingEvents: 6})
	for i := 0; i < 3; i++ {
		b.Publish("s", kOutput, nil)
	}
	s, _ := b.Subscribe("s", 0)
	defer s.Close()
	all := b.SubscribeAll(0, nil)
	defer all.Close()
	wantSeqs(t, []*termdv1.Event{next(t, ctx, s), next(t, ctx, s)}, 1, 2)

	for i := 0; i < 7; i++ { // seqs 4..10; ring holds 7..10
		b.Publish("s", kOutput, nil)
	}
	ev := next(t, ctx, s)
	wantLagged(t, ev, 2, 4) // missed 3,4,5,6
	if ev.Seq != 6 || ev.SessionId != "s" || ev.GlobalSeq != 0 || ev.Time == nil {
		t.Fatalf("lagged header: %v", ev)
	}
	var rest []*termdv1.Event
	for i := 0; i < 4; i++ {
		rest = append(rest, next(t, ctx, s))
	}
	wantSeqs(t, rest, 7, 10)

	// The all-sessions stream lags in global_seq terms: ring holds g5..g10.
	ev = next(t, ctx, all)
	wantLagged(t, ev, 0, 4)
	if ev.GlobalSeq != 4 || ev.Seq != 0 || ev.SessionId != "" {
		t.Fatalf("global lagged header: %v", ev)
	}
	if ev := next(t, ctx, all); ev.GlobalSeq != 5 {
		t.Fatalf("after lag got global_seq %d, want 5", ev.GlobalSeq)
	}

	// Resuming from the LAGGED event's Seq does not report the gap again;
	// resuming from resume_from_seq does.
	r1, _ := b.Subscribe("s", 6)
	if ev := next(t, ctx, r1); ev.Seq != 7 || ev.Kind == kLagged {
		t.Fatalf("resume at lagged seq: got %v", ev)
	}
	r1.Close()
	r2, _ := b.Subscribe("s", 2)
	wantLagged(t, next(t, ctx, r2), 2, 4)
	r2.Close()
}

func TestLaggedByBytes(t *testing.T) {
	ctx := testCtx(t)
	ev := New(Options{}).Publish("x", kOutput, output(1000))
	size := accountedSize(ev)
	// Room for three such events by bytes, plenty by count.
	b := New(Options{SessionRingEvents: 100, SessionRingBytes: 3*size + size/2})
	for i := 0; i < 10; i++ {
		b.Publish("s", kOutput, output(1000))
	}
	s, _ := b.Subscribe("s", 0)
	defer s.Close()
	wantLagged(t, next(t, ctx, s), 0, 7)
	wantSeqs(t, []*termdv1.Event{next(t, ctx, s), next(t, ctx, s), next(t, ctx, s)}, 8, 10)

	// An event bigger than the whole budget is still kept (alone).
	b.Publish("s", kOutput, output(10*size))
	wantSeqs(t, []*termdv1.Event{next(t, ctx, s)}, 11, 11)
	s2, _ := b.Subscribe("s", 0)
	defer s2.Close()
	wantLagged(t, next(t, ctx, s2), 0, 10)
	wantSeqs(t, []*termdv1.Event{next(t, ctx, s2)}, 11, 11)
}

// checkRing verifies a ring's accounting against the events it holds.
func checkRing(t *testing.T, name string, r *ring) {
	t.Helper()
	sum := 0
	for i := 0; i < r.n; i++ {
		sl := r.buf[(r.head+i)%len(r.buf)]
		sum += sl.size
		if want := accountedSize(sl.ev); sl.size != want {
			t.Fatalf("%s: slot size %d, event sizes %d", name, sl.size, want)
		}
	}
	if sum != r.bytes {
		t.Fatalf("%s: accounted %d bytes, holds %d", name, r.bytes, sum)
	}
	if r.n > r.maxEvents || len(r.buf) > r.maxEvents || (r.n > 1 && r.bytes > r.maxBytes) {
		t.Fatalf("%s: %d events / %d bytes over bounds %d / %d", name, r.n, r.bytes, r.maxEvents, r.maxBytes)
	}
	// Evicted slots are released.
	for i := r.n; i < len(r.buf); i++ {
		if r.buf[(r.head+i)%len(r.buf)].ev != nil {
			t.Fatalf("%s: evicted slot still references an event", name)
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestNonReadingSubscriberNeverBlocksPublish(t *testing.T) {
	ctx := testCtx(t)
	const n = 100_000
	b := New(Options{SessionRingEvents: 64, SessionRingBytes: 32 << 10, GlobalRingEvents: 128, GlobalRingBytes: 64 << 10})
	b.Publish("s", kCreated, nil)
	idle, _ := b.Subscribe("s", 0)
	defer idle.Close()
	idleAll := b.SubscribeAll(0, nil)
	defer idleAll.Close()

	before := heapInUse()
	done := make(chan struct{})
	go func() { // if Publish blocked on the idle subscribers this would hang
		defer close(done)
		for i := 0; i < n; i++ {
			b.Publish("s", kOutput, output(1024))
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Publish blocked behind a subscriber that never reads")
	}
	after := heapInUse()

	b.mu.Lock()
	sr := b.sessions["s"].ring
	checkRing(t, "session", sr)
	checkRing(t, "global", b.global)
	held := sr.n
	b.mu.Unlock()
	// ~100 MiB were published; the bus holds a few dozen KiB of it.
	if after > before && after-before > 8<<20 {
		t.Fatalf("heap grew by %d bytes publishing %d events into bounded rings", after-before, n)
	}

	// The idle subscriber is told exactly what it missed, then continues.
	ev := next(t, ctx, idle)
	dropped := uint64(n+1) - uint64(held)
	wantLagged(t, ev, 0, dropped)
	var rest []*termdv1.Event
	for i := 0; i < held; i++ {
		rest = append(rest, next(t, ctx, idle))
	}
	wantSeqs(t, rest, dropped+1, n+1)
}

func TestCloseSessionDrainsThenEOF(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{ClosedSessionTail: 3})
	b.Publish("s", kCreated, nil)
	early, _ := b.Subscribe("s", 0)
	blocked, _ := b.Subscribe("s", 0)
	next(t, ctx, blocked)

	got := make(chan error, 1)
	var blockedEvents []*termdv1.Event
	go func() {
		for {
			ev, err := blocked.Next(ctx)
			if err != nil {
				got <- err
				return
			}
			blockedEvents = append(blockedEvents, ev)
		}
	}()
	for i := 0; i < 8; i++ {
		b.Publish("s", kOutput, nil)
	}
	b.Publish("s", kClosed, nil) // seq 10
	b.CloseSession("s")
	b.CloseSession("s") // idempotent
	if ev := b.Publish("s", kOutput, nil); ev != nil {
		t.Fatalf("Publish after close stored %v", ev)
	}
	if b.LastSeq("s") != 10 {
		t.Fatalf("LastSeq after close = %d", b.LastSeq("s"))
	}

	if err := <-got; err != io.EOF {
		t.Fatalf("blocked Next ended with %v, want io.EOF", err)
	}
	wantSeqs(t, blockedEvents, 2, 10)
	evs := drain(t, ctx, early)
	wantSeqs(t, evs, 1, 10)
	if evs[9].Kind != kClosed {
		t.Fatalf("last event %v", evs[9])
	}
	if _, err := early.Next(ctx); err != io.EOF {
		t.Fatalf("Next after EOF = %v", err)
	}

	// Still subscribed: the ring is intact for late subscribers.
	late, err := b.Subscribe("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, drain(t, ctx, late), 1, 10)
	early.Close()
	blocked.Close()
	late.Close()
	if b.Subscribers() != 0 {
		t.Fatalf("Subscribers = %d", b.Subscribers())
	}

	// With no subscribers left the ring is trimmed to the tail.
	b.mu.Lock()
	r := b.sessions["s"].ring
	if r.n != 3 || len(r.buf) != 3 {
		t.Fatalf("closed ring holds %d events in %d slots, want 3", r.n, len(r.buf))
	}
	checkRing(t, "closed", r)
	b.mu.Unlock()
	s, _ := b.Subscribe("s", 0)
	wantLagged(t, next(t, ctx, s), 0, 7)
	wantSeqs(t, drain(t, ctx, s), 8, 10)
	s.Close()
	s, _ = b.Subscribe("s", 10)
	if _, err := s.Next(ctx); err != io.EOF {
		t.Fatalf("caught-up subscriber of closed session: %v", err)
	}
	s.Close()
}

func TestClosedSessionsForgotten(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{ClosedSessions: 2})
	for i := 0; i < 3; i++ {
		id := fmt.Sprint("s", i)
		b.Publish(id, kCreated, nil)
	}
	held, _ := b.Subscribe("s0", 0)
	for i := 0; i < 3; i++ {
		b.CloseSession(fmt.Sprint("s", i))
	}
	if _, err := b.Subscribe("s0", 0); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("oldest closed session still known: %v", err)
	}
	for _, id := range []string{"s1", "s2"} {
		s, err := b.Subscribe(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, drain(t, ctx, s), 1, 1)
		s.Close()
	}
	// A subscriber of a forgotten session still drains it.
	wantSeqs(t, drain(t, ctx, held), 1, 1)
	held.Close()
	// Closing an unknown session makes later Publish to it a no-op.
	b.CloseSession("never")
	if b.Publish("never", kCreated, nil) != nil {
		t.Fatal("Publish to a session closed before it started was stored")
	}
	if b.Subscribers() != 0 {
		t.Fatalf("Subscribers = %d", b.Subscribers())
	}
}

func TestCancelAndCloseNoLeak(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{})
	b.Publish("s", kCreated, nil)
	s, _ := b.Subscribe("s", 1) // caught up: Next blocks
	all := b.SubscribeAll(b.LastGlobalSeq(), nil)
	if b.Subscribers() != 2 {
		t.Fatalf("Subscribers = %d", b.Subscribers())
	}

	cctx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 2)
	go func() { _, err := s.Next(cctx); errs <- err }()
	go func() { _, err := all.Next(cctx); errs <- err }()
	cancel()
	for i := 0; i < 2; i++ {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after cancel = %v", err)
		}
	}
	// Cancel does not lose the subscription: it still works until Close.
	b.Publish("s", kOutput, nil)
	if ev := next(t, ctx, s); ev.Seq != 2 {
		t.Fatalf("after cancel got seq %d", ev.Seq)
	}
	s.Close()
	s.Close()
	all.Close()
	if b.Subscribers() != 0 {
		t.Fatalf("Subscribers after Close = %d", b.Subscribers())
	}
	if _, err := s.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v", err)
	}

	// Close from another goroutine unblocks a waiting Next.
	w, _ := b.Subscribe("s", b.LastSeq("s"))
	go func() { _, err := w.Next(ctx); errs <- err }()
	w.Close()
	if err := <-errs; !errors.Is(err, ErrClosed) {
		t.Fatalf("Next during Close = %v", err)
	}
	if b.Subscribers() != 0 {
		t.Fatalf("Subscribers = %d", b.Subscribers())
	}
	// Publish no longer pokes closed subscribers.
	b.mu.Lock()
	if n := len(b.sessions["s"].subs) + len(b.allSubs); n != 0 {
		t.Fatalf("%d subscribers still linked", n)
	}
	b.mu.Unlock()
}

// checkStream validates a session subscriber's view: seqs are consecutive
// except across a LAGGED event, which must describe the gap exactly.
type streamCheck struct {
	last    uint64
	lagged  uint64 // LAGGED events seen
	dropped uint64
}

func (c *streamCheck) see(ev *termdv1.Event, seq uint64) error {
	if ev.Kind == kLagged {
		l := ev.GetLagged()
		if l.ResumeFromSeq != c.last || l.Dropped == 0 || seq != l.ResumeFromSeq+l.Dropped {
			return fmt.Errorf("after %d: bad LAGGED %v", c.last, ev)
		}
		c.lagged++
		c.dropped += l.Dropped
		c.last = seq
		return nil
	}
	if seq != c.last+1 {
		return fmt.Errorf("after %d got %d", c.last, seq)
	}
	c.last = seq
	return nil
}

func TestConcurrentPublishersAndSubscribers(t *testing.T) {
	ctx := testCtx(t)
	const (
		sessions   = 4
		publishers = 3 // per session
		perPub     = 2000
	)
	b := New(Options{SessionRingEvents: 32, GlobalRingEvents: 64})
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprint("s", i)
		b.Publish(ids[i], kCreated, nil)
	}

	var wg sync.WaitGroup
	errc := make(chan error, 64)
	results := make(chan [2]uint64, 64) // session index, last seq seen
	for i, id := range ids {
		for k := 0; k < 2; k++ {
			sub, err := b.Subscribe(id, 0)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer sub.Close()
				var c streamCheck
				for {
					ev, err := sub.Next(ctx)
					if err == io.EOF {
						results <- [2]uint64{uint64(i), c.last}
						return
					}
					if err != nil {
						errc <- err
						return
					}
					if ev.Kind != kLagged && ev.SessionId != id {
						errc <- fmt.Errorf("subscriber of %s got %s", id, ev.SessionId)
						return
					}
					if err := c.see(ev, ev.Seq); err != nil {
						errc <- err
						return
					}
					if k == 1 && ev.Seq%97 == 0 {
						runtime.Gosched() // a slower reader
					}
				}
			}()
		}
	}
	stop, allWG := startAllSessionsReaders(ctx, b, errc)

	var pubWG sync.WaitGroup
	for _, id := range ids {
		for p := 0; p < publishers; p++ {
			pubWG.Add(1)
			go func() {
				defer pubWG.Done()
				for j := 0; j < perPub; j++ {
					b.Publish(id, kOutput, output(64))
					if j%500 == 0 {
						b.Subscribers()
						b.LastSeq(id)
					}
				}
			}()
		}
	}
	pubWG.Wait()
	for _, id := range ids {
		b.Publish(id, kClosed, nil)
		b.CloseSession(id)
	}
	wg.Wait()
	stop()
	allWG.Wait()
	close(errc)
	close(results)
	for err := range errc {
		t.Error(err)
	}
	want := uint64(publishers*perPub + 2)
	n := 0
	for r := range results {
		n++
		if r[1] != want {
			t.Errorf("session s%d subscriber ended at seq %d, want %d", r[0], r[1], want)
		}
	}
	if n != sessions*2 {
		t.Errorf("%d session subscribers reached EOF, want %d", n, sessions*2)
	}
	if got := b.LastGlobalSeq(); got != uint64(sessions)*want {
		t.Errorf("LastGlobalSeq = %d, want %d", got, uint64(sessions)*want)
	}
	if b.Subscribers() != 0 {
		t.Errorf("Subscribers = %d after all closed", b.Subscribers())
	}
}

// startAllSessionsReaders starts two all-sessions subscribers that check
// global order and visibility (s0 is hidden from them), reporting to errc,
// until stop; allWG.Wait waits for them to end.
func startAllSessionsReaders(ctx context.Context, b *Bus, errc chan<- error) (stop context.CancelFunc, allWG *sync.WaitGroup) {
	// All-sessions subscribers: global order, visibility, until told to stop.
	stopAll, stop := context.WithCancel(ctx)
	allWG = new(sync.WaitGroup)
	for k := 0; k < 2; k++ {
		sub := b.SubscribeAll(0, func(id string) bool { return id != "s0" })
		allWG.Add(1)
		go func() {
			defer allWG.Done()
			defer sub.Close()
			var c streamCheck
			for {
				ev, err := sub.Next(stopAll)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						errc <- err
					}
					return
				}
				if ev.Kind == kLagged {
					// The cursor also passed invisible events, so the gap
					// starts at or after the last visible one.
					l := ev.GetLagged()
					if l.ResumeFromSeq < c.last || l.Dropped == 0 || ev.GlobalSeq != l.ResumeFromSeq+l.Dropped {
						errc <- fmt.Errorf("all-sessions: after g%d bad LAGGED %v", c.last, ev)
						return
					}
					c.last = ev.GlobalSeq
					continue
				}
				if ev.SessionId == "s0" || ev.GlobalSeq <= c.last {
					errc <- fmt.Errorf("all-sessions: got %s g%d after g%d", ev.SessionId, ev.GlobalSeq, c.last)
					return
				}
				c.last = ev.GlobalSeq
			}
		}()
	}
	return stop, allWG
}

func TestClosedSessionWithoutTail(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{ClosedSessionTail: -1})
	for i := 0; i < 5; i++ {
		b.Publish("s", kOutput, nil)
	}
	b.CloseSession("s")
	b.mu.Lock()
	if r := b.sessions["s"].ring; r.n != 0 || len(r.buf) != 0 || r.bytes != 0 {
		t.Fatalf("ring not freed: %d events, %d slots, %d bytes", r.n, len(r.buf), r.bytes)
	}
	b.mu.Unlock()
	s, err := b.Subscribe("s", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantLagged(t, next(t, ctx, s), 2, 3)
	if _, err := s.Next(ctx); err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
}

func TestRingWrapAndGrow(t *testing.T) {
	r := newRing(5, 1<<30)
	for seq := uint64(1); seq <= 23; seq++ {
		r.push(&termdv1.Event{Seq: seq}, seq, 10)
		lo := max(1, int(seq)-4)
		if r.first != uint64(lo) || r.n != int(seq)-lo+1 || r.bytes != 10*r.n {
			t.Fatalf("after %d: first %d n %d bytes %d", seq, r.first, r.n, r.bytes)
		}
		for s := uint64(lo); s <= seq; s++ {
			if ev := r.get(s); ev == nil || ev.Seq != s {
				t.Fatalf("after %d: get(%d) = %v", seq, s, ev)
			}
		}
		if r.get(uint64(lo)-1) != nil || r.get(seq+1) != nil {
			t.Fatalf("after %d: get outside the ring returned an event", seq)
		}
	}
	if len(r.buf) != 5 {
		t.Fatalf("buffer grew to %d slots, bound 5", len(r.buf))
	}
	r.trim(2, r.maxBytes)
	if r.n != 2 || len(r.buf) != 2 || r.first != 22 || r.get(23).Seq != 23 || r.bytes != 20 {
		t.Fatalf("trim: n %d slots %d first %d bytes %d", r.n, len(r.buf), r.first, r.bytes)
	}
}
