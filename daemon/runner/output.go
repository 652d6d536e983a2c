package runner

import (
	"encoding/hex"
	"hash"
	"io"
	"sync"
	"sync/atomic"
)

// budget is the total output an execution may write, across its streams.
// Past it the execution is ended (StatusOutputLimit); bytes beyond it are
// still counted and hashed but not passed on live.
type budget struct {
	max  int64 // 0 = unlimited
	used atomic.Int64
	once sync.Once
	over func() // ends the execution; called once
}

// take accounts n bytes and returns how many of them fit in the budget.
func (b *budget) take(n int) int {
	if b == nil || b.max <= 0 {
		return n
	}
	after := b.used.Add(int64(n))
	if after <= b.max {
		return n
	}
	b.once.Do(b.over)
	fit := b.max - (after - int64(n))
	return int(max(fit, 0))
}

// capture holds one output stream: the first cap bytes, a count and a running
// hash of every byte. Memory is bounded by cap plus one read buffer, whatever
// the command prints.
type capture struct {
	stream Stream
	limit  int64
	h      hash.Hash
	onOut  func(Stream, int64, []byte)
	budget *budget // shared by the execution's streams; nil = unlimited
	// tail keeps the last limit bytes instead of the first (Spec.KeepTail).
	tail bool

	mu    sync.Mutex
	kept  []byte
	total int64
	done  bool
	sum   string
}

func newCapture(s Stream, limit int64, h hash.Hash, onOut func(Stream, int64, []byte), b *budget) *capture {
	return &capture{stream: s, limit: limit, h: h, onOut: onOut, budget: b}
}

// A stream is read into a firstReadSize buffer until a read fills it, then
// into a readBufSize one. Most commands print little: with a 128 KiB
// buffer from the start, every execution allocated 256 KiB (zeroed) for a
// `pwd`, 32 running at once held 8 MiB of them, and the allocations alone
// set the daemon's GC pace under load; a chatty command gets the large
// buffer at its second read.
const (
	firstReadSize = 4 << 10
	readBufSize   = 128 << 10
)

// pump reads r to EOF (or error). It is the only writer of c.h.
func (c *capture) pump(r io.Reader) {
	buf := make([]byte, firstReadSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.add(buf[:n])
		}
		if err != nil {
			break
		}
		if n == len(buf) && len(buf) < readBufSize {
			buf = make([]byte, readBufSize)
		}
	}
	sum := hex.EncodeToString(c.h.Sum(nil))
	c.mu.Lock()
	c.done = true
	c.sum = sum
	c.mu.Unlock()
}

func (c *capture) add(p []byte) {
	c.h.Write(p)
	c.mu.Lock()
	off := c.total
	if c.tail {
		c.keepTail(p)
	} else if room := c.limit - int64(len(c.kept)); room > 0 {
		take := p
		if int64(len(take)) > room {
			take = take[:room]
		}
		if need := len(c.kept) + len(take); need > cap(c.kept) {
			// Grow geometrically but never past the cap.
			nc := int64(2*cap(c.kept) + len(take))
			if nc > c.limit {
				nc = c.limit
			}
			grown := make([]byte, len(c.kept), nc)
			copy(grown, c.kept)
			c.kept = grown
		}
		c.kept = append(c.kept, take...)
	}
	c.total += int64(len(p))
	c.mu.Unlock()
	live := p[:c.budget.take(len(p))]
	if c.onOut != nil && len(live) > 0 {
		c.onOut(c.stream, off, live)
	}
}

// keepTail keeps the last limit bytes seen (at least; view trims), in a
// buffer of twice the limit so the front is dropped by one copy per limit
// bytes written.
func (c *capture) keepTail(p []byte) {
	if c.limit <= 0 {
		return
	}
	if int64(len(p)) >= c.limit {
		c.kept = append(c.kept[:0], p[int64(len(p))-c.limit:]...)
		return
	}
	if c.kept == nil {
		c.kept = make([]byte, 0, 2*c.limit)
	}
	if len(c.kept)+len(p) > cap(c.kept) {
		keep := c.limit - int64(len(p))
		n := copy(c.kept, c.kept[int64(len(c.kept))-keep:])
		c.kept = c.kept[:n]
	}
	c.kept = append(c.kept, p...)
}

// view is what is kept: all of kept, or with tail its last limit bytes.
func (c *capture) view() []byte {
	if c.tail && int64(len(c.kept)) > c.limit {
		return c.kept[int64(len(c.kept))-c.limit:]
	}
	return c.kept
}

func (c *capture) read(offset int64, limit int) ([]byte, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if offset < 0 {
		offset = 0
	}
	var data []byte
	kept := c.view()
	if offset < int64(len(kept)) {
		end := int64(len(kept))
		if limit >= 0 && offset+int64(limit) < end {
			end = offset + int64(limit)
		}
		data = append([]byte(nil), kept[offset:end]...)
	}
	return data, c.total, c.done
}

func (c *capture) result() StreamResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.view()
	return StreamResult{
		Kept:      append([]byte(nil), kept...),
		Total:     c.total,
		Digest:    c.sum,
		Truncated: c.total > int64(len(kept)),
	}
}

// finishEmpty closes a stream that never had a writer (spawn failure).
func (c *capture) finishEmpty() StreamResult {
	c.mu.Lock()
	c.done = true
	c.sum = hex.EncodeToString(c.h.Sum(nil))
	c.mu.Unlock()
	return c.result()
}
