package journal

import "testing"

// The record buffers' pool keeps no large buffer: a large plan's record
// (its stdin, a long command) given back is let go, not held for the next
// record, which would keep its size in termd's heap for good.
func TestReleaseKeepsNoLargeBuffer(t *testing.T) {
	for range 4 {
		Release(make([]byte, 10, maxPooledLine+1))
		if b := lineBuffer(16); cap(b) > maxPooledLine {
			t.Fatalf("the pool gave back a %d-byte buffer (at most %d are kept)", cap(b), maxPooledLine)
		}
	}
	// A small one is used again, empty.
	small := make([]byte, 10, 4096)
	small[0] = 'x'
	Release(small)
	if b := lineBuffer(16); cap(b) < 16 || len(b) != 0 {
		t.Fatalf("buffer len %d cap %d", len(b), cap(b))
	}
}
