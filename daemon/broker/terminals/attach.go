package terminals

import (
	"context"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// AttachTerminal sends the screen, then output from sinceOffset (-1: from
// now) and the execution's terminal and state events, until its receipt.
// The client going away only detaches.
func (t *Terminals) AttachTerminal(ctx context.Context, caller *termdv1.Principal, r *termdv1.AttachTerminalRequest, send func(*termdv1.AttachTerminalResponse) error) error {
	if r.GetSinceOffset() < -1 {
		return errdefs.Invalid("since_offset %d: use an output offset, or -1 for output from now", r.GetSinceOffset())
	}
	release, err := t.host.AcquireStream(caller)
	if err != nil {
		return err
	}
	defer release()
	h, err := t.find(caller, r.GetExecutionId())
	if err != nil {
		return err
	}
	if r.GetTakeInput() {
		if proc := h.proc.Load(); proc == nil {
			return errdefs.Precondition("execution %s has ended; its terminal takes no input", h.x.ID)
		}
		if err := h.take(caller); err != nil {
			return err
		}
	}
	bus := t.host.Bus()
	sub, err := bus.Subscribe(h.x.SessionID, bus.LastSeq(h.x.SessionID))
	if err != nil {
		return errdefs.Internal("subscribing to session events: %v", err)
	}
	defer sub.Close()
	a := h.watch(r.GetSinceOffset())
	if !a.ended {
		h.publish(&termdv1.TerminalEvent{Kind: "attached", By: caller.GetName()})
		defer h.detach(a.w, caller)
	}
	if err := h.sendStart(a, send); err != nil {
		return err
	}
	if snap, finished := h.x.Snapshot(); finished && snap.GetReceiptId() != "" {
		return nil // nothing more will happen on this terminal
	}
	return t.follow(ctx, h, sub, a.w, send)
}

// attachment is a new client's start: its output queue, the screen, and
// the output it asked to see again.
type attachment struct {
	w        *termWatcher
	screen   *termdv1.Screen
	replay   []byte
	replayAt int64 // the output offset of replay
	ended    bool  // the terminal ended: nothing will be queued
}

// watch registers an output queue for a new client (unless the terminal
// ended) and takes the screen and the output since sinceOffset (-1: none)
// at the same instant.
func (h *Hub) watch(sinceOffset int64) attachment {
	a := attachment{w: &termWatcher{ch: make(chan *termdv1.OutputChunk, watcherBuffer)}}
	h.mu.Lock()
	snap := h.screen.Snapshot()
	screenOff := h.offset
	a.replayAt = screenOff
	if sinceOffset >= 0 {
		a.replay = h.sinceLocked(sinceOffset)
		a.replayAt = screenOff - int64(len(a.replay))
	}
	a.ended = h.ended
	if !a.ended {
		h.watchers[a.w] = struct{}{}
	} else {
		close(a.w.ch)
	}
	h.mu.Unlock()
	a.screen = h.screenOf(snap, screenOff)
	return a
}

// detach removes a client's output queue and says it left.
func (h *Hub) detach(w *termWatcher, caller *termdv1.Principal) {
	h.mu.Lock()
	if _, ok := h.watchers[w]; ok {
		delete(h.watchers, w)
	}
	h.mu.Unlock()
	h.publish(&termdv1.TerminalEvent{Kind: "detached", By: caller.GetName()})
}

// sendStart sends a new client the screen and the output it asked for again.
func (h *Hub) sendStart(a attachment, send func(*termdv1.AttachTerminalResponse) error) error {
	if err := send(&termdv1.AttachTerminalResponse{Payload: &termdv1.AttachTerminalResponse_Screen{Screen: a.screen}}); err != nil {
		return err
	}
	if len(a.replay) == 0 {
		return nil
	}
	c := &termdv1.OutputChunk{ExecutionId: h.x.ID, Stream: termdv1.OutputStream_OUTPUT_STREAM_STDOUT, Offset: a.replayAt, Data: []byte(h.x.Redactor.Redact(string(a.replay)))}
	return send(&termdv1.AttachTerminalResponse{Payload: &termdv1.AttachTerminalResponse_Output{Output: c}})
}

// pump passes the subscription's events to a channel until it or ctx ends;
// then its error comes on the other.
func pump(ctx context.Context, sub *events.Subscription) (<-chan *termdv1.Event, <-chan error) {
	evs := make(chan *termdv1.Event)
	evErr := make(chan error, 1)
	go func() {
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				evErr <- err
				return
			}
			select {
			case evs <- ev:
			case <-ctx.Done():
				evErr <- ctx.Err()
				return
			}
		}
	}()
	return evs, evErr
}

// follow sends an attached client the terminal's output and the
// execution's events until its receipt, the session's end or ctx's.
func (t *Terminals) follow(ctx context.Context, h *Hub, sub *events.Subscription, w *termWatcher, send func(*termdv1.AttachTerminalResponse) error) error {
	evs, evErr := pump(ctx, sub)
	sendChunk := func(c *termdv1.OutputChunk) error {
		return send(&termdv1.AttachTerminalResponse{Payload: &termdv1.AttachTerminalResponse_Output{Output: c}})
	}
	out := w.ch
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c, ok := <-out:
			if !ok {
				h.mu.Lock()
				lagged := w.lagged
				h.mu.Unlock()
				if lagged {
					return errdefs.Exhausted("this client fell more than %d output pieces behind the terminal and was detached; attach again", watcherBuffer)
				}
				out = nil // all output is sent; the receipt follows
				continue
			}
			if err := sendChunk(c); err != nil {
				return err
			}
		case <-evErr:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil // the session's events ended (closed)
		case ev := <-evs:
			if !t.eventOf(ev, h) {
				continue
			}
			last := ev.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED
			if last && out != nil {
				// Output first: the hub closed the queue before the receipt.
				for c := range out {
					if err := sendChunk(c); err != nil {
						return err
					}
				}
				out = nil
			}
			if err := send(&termdv1.AttachTerminalResponse{Payload: &termdv1.AttachTerminalResponse_Event{Event: ev}}); err != nil {
				return err
			}
			if last {
				return nil
			}
		}
	}
}

// eventOf: an event an attached client of h's execution sees (its output
// comes from the hub, not from output events).
func (t *Terminals) eventOf(ev *termdv1.Event, h *Hub) bool {
	switch p := ev.Payload.(type) {
	case *termdv1.Event_Terminal:
		return p.Terminal.ExecutionId == h.x.ID
	case *termdv1.Event_Output:
		return false
	}
	return t.host.EventOf(ev, h.x.ID, h.x.PlanID)
}
