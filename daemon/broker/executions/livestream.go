package executions

import (
	"sync"
	"time"

	"github.com/termd/termd/daemon/receiptstore"
)

// LiveStream redacts one output stream as it arrives and publishes it as
// events, coalesced: output that trickles in goes out at most once per
// stream every liveInterval (plus a last one at the end), so chatty output
// costs every viewer a bounded number of events per second; a full event
// (liveEventMax) goes out at once, so a flood costs a bounded number of
// events per byte and never waits for a slot (a viewer that cannot keep up
// falls behind the ring and is told so; the command is never slowed for it).
type LiveStream struct {
	mu        sync.Mutex
	red       *receiptstore.StreamRedactor
	offset    int64
	pending   []byte // redacted, not yet published
	lastFlush time.Time
	flush     *time.Timer // publishes pending at the next slot; nil when not armed
	publish   func(at int64, data []byte)
	idle      *time.Timer // flushes the redactor's held tail when output pauses
	closed    bool
}

// idleFlush is how long output may pause before the complete lines in the
// redactor's held-back tail (up to 4 KiB, kept to catch secrets split across
// writes) go out: a program that prints a line and then works must be seen
// live. The unfinished last line stays held, so a secret written in two
// pieces of one line is still caught.
const idleFlush = 200 * time.Millisecond

// liveInterval and liveEventMax bound live output: at most 1/liveInterval
// partial output events per second per stream, and full events of about
// liveEventMax bytes.
const (
	liveInterval = 50 * time.Millisecond
	liveEventMax = 512 << 10
)

// Write passes a chunk to the redactor and re-arms the idle flush.
func (ls *LiveStream) Write(chunk []byte) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	_, _ = ls.red.Write(chunk)
	if len(ls.pending) >= liveEventMax && !ls.closed {
		ls.flushLocked()
	}
	ls.armLocked()
	if ls.idle == nil {
		ls.idle = time.AfterFunc(idleFlush, func() {
			ls.mu.Lock()
			defer ls.mu.Unlock()
			if !ls.closed {
				_ = ls.red.FlushLines()
				ls.armLocked()
			}
		})
	} else {
		ls.idle.Reset(idleFlush)
	}
}

// add takes redacted text from the redactor (called with ls.mu held).
func (ls *LiveStream) add(p string) { ls.pending = append(ls.pending, p...) }

// armLocked schedules the publication of pending output at the next slot.
func (ls *LiveStream) armLocked() {
	if len(ls.pending) == 0 || ls.flush != nil || ls.closed {
		return
	}
	ls.flush = time.AfterFunc(max(time.Until(ls.lastFlush.Add(liveInterval)), 0), func() {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		ls.flush = nil
		if !ls.closed {
			ls.flushLocked()
		}
	})
}

// flushLocked publishes pending output as one event.
func (ls *LiveStream) flushLocked() {
	ls.lastFlush = time.Now()
	if len(ls.pending) == 0 {
		return
	}
	data := ls.pending
	ls.pending = nil
	switch {
	case len(data) >= liveEventMax:
		// A flood: the next event will be as large, so its buffer is made
		// at that size at once instead of grown by copying (up to a read
		// and the redactor's hold more than liveEventMax).
		ls.pending = make([]byte, 0, len(data)+len(data)/4)
	case cap(data) > 2*len(data)+4096:
		// The last of a flood: the event keeps only what it holds.
		data = append([]byte(nil), data...)
	}
	at := ls.offset
	ls.offset += int64(len(data))
	ls.publish(at, data)
}

// Close flushes the tail for good.
func (ls *LiveStream) Close() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.idle != nil {
		ls.idle.Stop()
	}
	if ls.flush != nil {
		ls.flush.Stop()
		ls.flush = nil
	}
	ls.closed = true
	_ = ls.red.Close()
	ls.flushLocked()
}

// NewLiveStream is a LiveStream that redacts with red and publishes with
// publish (the offset of the piece in the redacted stream, and the piece).
func NewLiveStream(red *receiptstore.Redactor, publish func(at int64, data []byte)) *LiveStream {
	ls := &LiveStream{publish: publish}
	ls.red = red.NewStream(eventWriter{ls}, 0)
	return ls
}

// eventWriter receives redacted output for its LiveStream.
type eventWriter struct{ ls *LiveStream }

// WriteString takes the redactor's text.
func (w eventWriter) WriteString(s string) (int, error) { w.ls.add(s); return len(s), nil }

func (w eventWriter) Write(p []byte) (int, error) { w.ls.add(string(p)); return len(p), nil }
