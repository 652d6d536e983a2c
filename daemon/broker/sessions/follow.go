package sessions

import (
	"context"
	"errors"
	"time"

	"github.com/termd/termd/daemon/events"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Linger is how long Follow holds an event that does not end the stream
// for the events after it, and LingerBytes how much held output sends
// at once: a short command's whole stream (started, its output, finished,
// the receipt) leaves in one batch (one socket write, one wake-up of the
// client, and none while the command runs), while a long command's
// progress and output still arrive within Linger of being published.
const (
	Linger      = 20 * time.Millisecond
	LingerBytes = 64 << 10
)

// Follow delivers the events of execution execID of plan planID from sub,
// its session's events subscribed to before it started, until its plan's
// receipt is signed or the session's events end (nil), or ctx ends. ends
// is the execution's end events so far (read under the broker's mutex).
// Events go to send in order, in batches: an event is held up to linger
// (0: not at all) for those that follow it, unless the stream ends with
// them or held output reaches LingerBytes. send must not keep the slice.
func Follow(ctx context.Context, sub *events.Subscription, execID, planID string, linger time.Duration, ends func() []*termdv1.Event, send func([]*termdv1.Event) error) error {
	b := batch{send: send, linger: linger}
	defer b.stop()
	for {
		ev, err := sub.NextUntil(ctx, b.expired())
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return b.flush() // session closed: its events ended
		}
		if ev == nil { // held for linger: out they go
			if err := b.flush(); err != nil {
				return err
			}
			continue
		}
		if !EventOf(ev, execID, planID) {
			continue
		}
		b.add(ev)
		if ev.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED && ev.GetReceipt().GetPlanId() == planID {
			return b.flush()
		}
		if ev.Kind == termdv1.EventKind_EVENT_KIND_LAGGED || ev.Kind == termdv1.EventKind_EVENT_KIND_FINISHED {
			// A reader that fell behind the session's ring (other
			// executions of the session wrote a lot) may have been skipped
			// past this execution's end: without it the stream would wait
			// forever. The end events it missed are sent again (they keep
			// their seq). An end without a stored receipt ends at FINISHED.
			// (After FINISHED the receipt's event, published with it under
			// the broker's mutex that ends takes, is already there to read.)
			missed, over := endsUpTo(ends(), ev.Seq)
			if ev.Kind == termdv1.EventKind_EVENT_KIND_LAGGED {
				b.add(missed...)
			}
			if over {
				return b.flush()
			}
		}
		if err := b.held(); err != nil {
			return err
		}
	}
}

// Each is a Follow send that hands the events of each batch to f one by one.
func Each(f func(*termdv1.Event) error) func([]*termdv1.Event) error {
	return func(evs []*termdv1.Event) error {
		for _, ev := range evs {
			if err := f(ev); err != nil {
				return err
			}
		}
		return nil
	}
}

// batch is the events Follow holds, and its linger timer.
type batch struct {
	send   func([]*termdv1.Event) error
	linger time.Duration
	events []*termdv1.Event
	bytes  int
	timer  *time.Timer
	armed  bool
}

func (b *batch) add(evs ...*termdv1.Event) {
	for _, ev := range evs {
		b.events = append(b.events, ev)
		b.bytes += len(ev.GetOutput().GetData())
	}
}

// held sends the batch now when it may not wait (no linger, output
// enough), or arms the linger for its first event.
func (b *batch) held() error {
	if b.linger <= 0 || b.bytes >= LingerBytes {
		return b.flush()
	}
	if !b.armed {
		if b.timer == nil {
			b.timer = time.NewTimer(b.linger)
		} else {
			b.timer.Reset(b.linger)
		}
		b.armed = true
	}
	return nil
}

// expired fires when the held events' linger is over (nil: none held).
func (b *batch) expired() <-chan time.Time {
	if !b.armed {
		return nil
	}
	return b.timer.C
}

// flush sends what is held.
func (b *batch) flush() error {
	b.stop()
	if len(b.events) == 0 {
		return nil
	}
	err := b.send(b.events)
	b.events, b.bytes = b.events[:0], 0
	return err
}

func (b *batch) stop() {
	if b.armed {
		b.timer.Stop()
		b.armed = false
	}
}

// endsUpTo returns the end events with a seq at most seq, and whether the
// last end event is among them (nothing more will come for the execution).
func endsUpTo(ends []*termdv1.Event, seq uint64) (missed []*termdv1.Event, over bool) {
	for _, ev := range ends {
		if ev.Seq <= seq {
			missed = append(missed, ev)
		}
	}
	return missed, len(ends) > 0 && ends[len(ends)-1].Seq <= seq
}

// EventOf says whether a session event concerns execution execID of plan
// planID (a LAGGED event concerns every reader).
func EventOf(ev *termdv1.Event, execID, planID string) bool {
	switch p := ev.Payload.(type) {
	case *termdv1.Event_Execution:
		return p.Execution.Id == execID
	case *termdv1.Event_Output:
		return p.Output.ExecutionId == execID
	case *termdv1.Event_Receipt:
		return p.Receipt.PlanId == planID
	case *termdv1.Event_Lagged:
		return true
	case *termdv1.Event_EgressRefused:
		return p.EgressRefused.ExecutionId == execID
	}
	return false
}
