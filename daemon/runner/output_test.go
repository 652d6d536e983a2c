package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand"
	"testing"
)

// With KeepTail a stream keeps its last bytes, whatever the sizes of the
// writes, and still counts and hashes every byte.
func TestCaptureKeepsTheTail(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, limit := range []int64{1, 7, 100, 4096} {
		c := newCapture(Stdout, limit, sha256.New(), nil, nil)
		c.tail = true
		var all []byte
		for i := 0; i < 300; i++ {
			chunk := make([]byte, rng.Intn(int(3*limit)+2))
			for j := range chunk {
				chunk[j] = byte('a' + rng.Intn(26))
			}
			all = append(all, chunk...)
			c.add(chunk)
			want := all[max(0, int64(len(all))-limit):]
			if got, _, _ := c.read(0, -1); !bytes.Equal(got, want) {
				t.Fatalf("limit %d after %d bytes: kept %q, want the last %q", limit, len(all), got, want)
			}
		}
		c.pump(bytes.NewReader(nil))
		r := c.result()
		sum := sha256.Sum256(all)
		if r.Total != int64(len(all)) || r.Digest != hex.EncodeToString(sum[:]) || !r.Truncated || int64(len(r.Kept)) != limit {
			t.Fatalf("limit %d: total %d (want %d), truncated %v, kept %d, digest ok %v", limit, r.Total, len(all), r.Truncated, len(r.Kept), r.Digest == hex.EncodeToString(sum[:]))
		}
	}
}
