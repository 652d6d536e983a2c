package sessions

import (
	"context"
	"errors"
	"testing"

	"github.com/termd/termd/daemon/events"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func publishExec(bus *events.Bus, session, execID string, kind termdv1.EventKind) *termdv1.Event {
	return bus.Publish(session, kind, func(e *termdv1.Event) {
		e.Payload = &termdv1.Event_Execution{Execution: &termdv1.Execution{Id: execID}}
	})
}

// Follow sends one execution's events of its session, not another's, and
// ends at its plan's signed receipt.
func TestFollowEndsAtTheReceipt(t *testing.T) {
	bus := events.New(events.Options{})
	publishExec(bus, "s", "old", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED)
	sub, err := bus.Subscribe("s", bus.LastSeq("s"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	publishExec(bus, "s", "e", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED)
	publishExec(bus, "s", "x", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED)
	bus.Publish("s", termdv1.EventKind_EVENT_KIND_OUTPUT, func(e *termdv1.Event) {
		e.Payload = &termdv1.Event_Output{Output: &termdv1.OutputChunk{ExecutionId: "e"}}
	})
	end := publishExec(bus, "s", "e", termdv1.EventKind_EVENT_KIND_FINISHED)
	bus.Publish("s", termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED, func(e *termdv1.Event) {
		e.Payload = &termdv1.Event_Receipt{Receipt: &termdv1.ReceiptSummary{PlanId: "p"}}
	})
	publishExec(bus, "s", "e", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED) // after the end: never read
	var kinds []termdv1.EventKind
	err = Follow(context.Background(), sub, "e", "p", Linger, func() []*termdv1.Event { return nil }, Each(func(ev *termdv1.Event) error {
		kinds = append(kinds, ev.Kind)
		return nil
	}))
	want := []termdv1.EventKind{termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED, termdv1.EventKind_EVENT_KIND_OUTPUT, termdv1.EventKind_EVENT_KIND_FINISHED, termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED}
	if err != nil || len(kinds) != len(want) {
		t.Fatalf("followed %v (%v), want %v", kinds, err, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("followed %v, want %v", kinds, want)
		}
	}
	if !EventOf(end, "e", "p") || EventOf(end, "x", "p") {
		t.Error("EventOf disagrees on an execution event")
	}
}

// A reader skipped past the execution's end (LAGGED) gets the end events it
// missed again and stops: nothing more comes for the execution.
func TestFollowResendsMissedEnds(t *testing.T) {
	bus := events.New(events.Options{SessionRingEvents: 2})
	publishExec(bus, "s", "e", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED)
	sub, err := bus.Subscribe("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	end := publishExec(bus, "s", "e", termdv1.EventKind_EVENT_KIND_FINISHED)
	for range 2 { // the ring keeps 2: the end is the last event the reader missed
		publishExec(bus, "s", "x", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED)
	}
	var got []*termdv1.Event
	// Once it was sent LAGGED a Follow that read on would see ctx's end.
	ctx, cancel := context.WithCancel(context.Background())
	err = Follow(ctx, sub, "e", "p", Linger, func() []*termdv1.Event { return []*termdv1.Event{end} }, Each(func(ev *termdv1.Event) error {
		got = append(got, ev)
		cancel()
		return nil
	}))
	if err != nil || len(got) != 2 || got[0].Kind != termdv1.EventKind_EVENT_KIND_LAGGED || got[1] != end {
		t.Fatalf("followed %v (%v): want LAGGED, then the missed end", got, err)
	}
}

// Stream from "now" sends what comes after it started; a session the bus
// never saw has no events; a send error ends the stream with it.
func TestStream(t *testing.T) {
	bus := events.New(events.Options{})
	publishExec(bus, "s", "before", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED)
	if err := Stream(context.Background(), bus, "nope", 0, false, nil, nil, nil); err == nil {
		t.Fatal("a session without events streamed")
	}
	stop := errors.New("enough")
	var got []string
	err := Stream(context.Background(), bus, "s", 0, false, nil, func() {
		publishExec(bus, "s", "after", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED)
	}, func(ev *termdv1.Event) error {
		got = append(got, ev.GetExecution().GetId())
		return stop
	})
	if !errors.Is(err, stop) || len(got) != 1 || got[0] != "after" {
		t.Fatalf("streamed %v (%v), want only the event after ready", got, err)
	}
	got = nil
	err = Stream(context.Background(), bus, "", 0, true, func(id string) bool { return id == "t" }, func() {
		publishExec(bus, "s", "hidden", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED)
		publishExec(bus, "t", "shown", termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED)
	}, func(ev *termdv1.Event) error {
		got = append(got, ev.GetExecution().GetId())
		return stop
	})
	if !errors.Is(err, stop) || len(got) != 1 || got[0] != "shown" {
		t.Fatalf("all sessions with history: %v (%v), want only the visible session's", got, err)
	}
}
