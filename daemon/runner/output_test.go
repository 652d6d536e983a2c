package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand"
	"runtime"
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

// chunks is a reader that answers each Read with at most n bytes, as a
// pipe does with what the command wrote so far.
type chunks struct {
	data []byte
	n    int
}

func (r *chunks) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.data)
	r.data = r.data[k:]
	return k, nil
}

// Reading a quiet command's output allocates a small buffer, not the
// 128 KiB one a chatty command gets (32 executions running at once held
// 8 MiB of them); a stream that fills its buffer moves to the large one and
// every byte is still captured and hashed.
func TestCaptureReadBufferGrowsWithTheOutput(t *testing.T) {
	allocated := func(data []byte, chunk int) (uint64, StreamResult) {
		c := newCapture(Stdout, 1<<30, sha256.New(), nil, nil)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c.pump(&chunks{data: data, n: chunk})
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, c.result()
	}
	quiet := []byte("/home/agent/work\n")
	n, r := allocated(quiet, 1<<20)
	if n >= 64<<10 || !bytes.Equal(r.Kept, quiet) {
		t.Errorf("pwd's output: %d bytes allocated (want < 64 KiB), kept %q", n, r.Kept)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	n, r = allocated(big, 1<<20)
	sum := sha256.Sum256(big)
	if !bytes.Equal(r.Kept, big) || r.Digest != hex.EncodeToString(sum[:]) || n < readBufSize {
		t.Errorf("1 MiB of output: kept %d bytes, digest ok %v, %d bytes allocated (want the %d byte buffer)", len(r.Kept), r.Digest == hex.EncodeToString(sum[:]), n, readBufSize)
	}
}
