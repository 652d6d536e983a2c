package events

import termdv1 "github.com/termd/termd/proto/termd/v1"

// ring holds the most recent events of one stream (a session, or the whole
// daemon). The events it holds always have consecutive sequence numbers
// first, first+1, ... first+n-1, so an event is found by arithmetic.
//
// It is bounded by count (maxEvents) and by accounted bytes (maxBytes). The
// newest event is always kept, even if it alone is over maxBytes, so a
// subscriber can always make progress; the bound is therefore
// max(maxBytes, size of the newest event).
//
// The backing array grows on demand up to maxEvents slots, so an idle session
// costs a few slots, not maxEvents. Not safe for concurrent use; the Bus
// mutex guards it.
type ring struct {
	buf       []slot // circular once full; len(buf) <= maxEvents
	head      int    // index in buf of the oldest event
	n         int    // events held
	first     uint64 // sequence number of the oldest held event (valid if n > 0)
	bytes     int    // sum of slot sizes held
	maxEvents int
	maxBytes  int
}

type slot struct {
	ev   *termdv1.Event
	size int
}

func newRing(maxEvents, maxBytes int) *ring {
	return &ring{maxEvents: maxEvents, maxBytes: maxBytes}
}

// push appends ev, which has sequence number seq (must be the successor of
// the newest held event, or anything if the ring is empty), then evicts the
// oldest events until both bounds hold again.
func (r *ring) push(ev *termdv1.Event, seq uint64, size int) {
	if r.n == 0 {
		r.first = seq
		r.head = 0
	}
	if r.n == len(r.buf) {
		r.grow()
	}
	if r.n == len(r.buf) { // at maxEvents: overwrite the oldest
		r.popOldest()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = slot{ev: ev, size: size}
	r.n++
	r.bytes += size
	for r.n > 1 && r.bytes > r.maxBytes {
		r.popOldest()
	}
}

// grow doubles the backing array, capped at maxEvents, keeping order.
func (r *ring) grow() {
	if len(r.buf) >= r.maxEvents {
		return
	}
	size := max(8, 2*len(r.buf))
	size = min(size, r.maxEvents)
	r.resize(size)
}

// resize moves the held events into a new array of the given size (>= n),
// oldest at index 0.
func (r *ring) resize(size int) {
	nb := make([]slot, size)
	for i := 0; i < r.n; i++ {
		nb[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf = nb
	r.head = 0
}

func (r *ring) popOldest() {
	s := &r.buf[r.head]
	r.bytes -= s.size
	*s = slot{} // release the event
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.first++
}

// trim keeps only the newest keep events, and of those no more than
// maxBytes (the newest is kept), and shrinks the backing array to fit
// them, so a closed session costs no more than its tail.
func (r *ring) trim(keep, maxBytes int) {
	for r.n > keep || (r.n > 1 && r.bytes > maxBytes) {
		r.popOldest()
	}
	if len(r.buf) != r.n {
		r.resize(r.n)
	}
}

// oldest returns the sequence number of the oldest held event; if the ring is
// empty it returns last+1 (nothing at or before last is held).
func (r *ring) oldest(last uint64) uint64 {
	if r.n == 0 {
		return last + 1
	}
	return r.first
}

// get returns the event with sequence number seq, or nil if not held.
func (r *ring) get(seq uint64) *termdv1.Event {
	if r.n == 0 || seq < r.first || seq-r.first >= uint64(r.n) {
		return nil
	}
	return r.buf[(r.head+int(seq-r.first))%len(r.buf)].ev
}
