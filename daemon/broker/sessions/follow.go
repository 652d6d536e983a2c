package sessions

import (
	"context"
	"errors"

	"github.com/termd/termd/daemon/events"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Follow delivers the events of execution execID of plan planID from sub,
// its session's events subscribed to before it started, until its plan's
// receipt is signed or the session's events end (nil), or ctx ends. ends
// is the execution's end events so far (read under the broker's mutex).
func Follow(ctx context.Context, sub *events.Subscription, execID, planID string, ends func() []*termdv1.Event, send func(*termdv1.Event) error) error {
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil // session closed: its events ended
		}
		if !EventOf(ev, execID, planID) {
			continue
		}
		if err := send(ev); err != nil {
			return err
		}
		if ev.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED && ev.GetReceipt().GetPlanId() == planID {
			return nil
		}
		if ev.Kind != termdv1.EventKind_EVENT_KIND_LAGGED && ev.Kind != termdv1.EventKind_EVENT_KIND_FINISHED {
			continue
		}
		// A reader that fell behind the session's ring (other executions
		// of the session wrote a lot) may have been skipped past this
		// execution's end: without it the stream would wait forever. The
		// end events it missed are sent again (they keep their seq). An
		// end without a stored receipt ends at FINISHED.
		missed, over := endsUpTo(ends(), ev.Seq)
		if ev.Kind == termdv1.EventKind_EVENT_KIND_LAGGED {
			for _, m := range missed {
				if err := send(m); err != nil {
					return err
				}
			}
		}
		if over {
			return nil
		}
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
