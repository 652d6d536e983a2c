package receiptstore

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"
)

// benchInputs are the three output shapes of issue 17's throughput figure:
// secret-shaped text (127-char lines of [0-9a-zA-Z-_.:/+=], which is what
// hashes, lockfiles and minified bundles look like to the redactor), a plain
// log, and random bytes.
func benchInputs(size int) map[string][]byte {
	rng := rand.New(rand.NewSource(17))
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.:/+="
	shaped := make([]byte, 0, size)
	for len(shaped) < size {
		for i := 0; i < 127; i++ {
			shaped = append(shaped, alphabet[rng.Intn(len(alphabet))])
		}
		shaped = append(shaped, '\n')
	}
	var log strings.Builder
	words := []string{"GET", "/api/v1/items", "200", "ok", "user", "request", "took", "ms", "cache", "miss", "worker", "started", "INFO", "WARN", "done", "bytes"}
	for n := 0; log.Len() < size; n++ {
		fmt.Fprintf(&log, "2026-12-02T03:%02d:%02d.%03dZ", n/60%60, n%60, n%1000)
		for i := 0; i < 10; i++ {
			log.WriteString(" " + words[rng.Intn(len(words))])
		}
		log.WriteString("\n")
	}
	random := make([]byte, size)
	rng.Read(random)
	return map[string][]byte{"shaped": shaped[:size], "log": []byte(log.String())[:size], "random": random}
}

type streamer interface {
	io.Writer
	Close() error
}

// streamThrough writes data in 64 KiB chunks, as the runner's pipe reads
// arrive, through a stream redactor.
func streamThrough(s streamer, data []byte) {
	for off := 0; off < len(data); off += 64 << 10 {
		_, _ = s.Write(data[off:min(off+64<<10, len(data))])
	}
	_ = s.Close()
}

// BenchmarkRedactStream measures the live output path's redaction against
// sha256 of the same bytes and against the reference (pre-issue-17)
// redactor, in one run; `go test -bench RedactStream` prints ratios.
func BenchmarkRedactStream(b *testing.B) {
	const size = 8 << 20
	for _, kind := range []string{"shaped", "log", "random"} {
		data := benchInputs(size)[kind]
		b.Run(kind+"/sha256", func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				sha256.Sum256(data)
			}
		})
		b.Run(kind+"/reference", func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				streamThrough(newRefRedactor().NewStream(io.Discard, 0), data)
			}
		})
		b.Run(kind+"/redactor", func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				streamThrough(NewRedactor().NewStream(io.Discard, 0), data)
			}
		})
	}
}

// TestBenchRedact prints, for 50 MiB of each output shape streamed through
// the live redactor in 64 KiB writes, the time against sha256 of the same
// bytes and against the reference (pre-issue-17) redactor, in one run. Run
// with TERMD_BENCH=1 (make bench). It asserts nothing about time.
func TestBenchRedact(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the redaction benchmark")
	}
	const size = 50 << 20
	inputs := benchInputs(size)
	for _, kind := range []string{"shaped", "log", "random"} {
		data := inputs[kind]
		timed := func(f func()) time.Duration {
			best := time.Duration(1 << 62)
			for i := 0; i < 3; i++ {
				start := time.Now()
				f()
				best = min(best, time.Since(start))
			}
			return best
		}
		base := timed(func() { sha256.Sum256(data) })
		ref := timed(func() { streamThrough(newRefRedactor().NewStream(io.Discard, 0), data) })
		now := timed(func() { streamThrough(NewRedactor().NewStream(io.Discard, 0), data) })
		t.Logf("redact 50 MiB %-6s: sha256 %v; reference redactor %v (%.1fx sha256); redactor %v (%.1fx sha256, %.1fx faster than the reference)",
			kind, base.Round(time.Millisecond), ref.Round(time.Millisecond), float64(ref)/float64(base),
			now.Round(time.Millisecond), float64(now)/float64(base), float64(ref)/float64(now))
	}
}

// BenchmarkFoldScan measures the filter scan alone: one sequential walk
// against the pieces walked side by side that scan uses.
func BenchmarkFoldScan(b *testing.B) {
	const size = 8 << 20
	in := benchInputs(size)
	for _, kind := range []string{"shaped", "log", "random"} {
		s := string(in[kind])
		var h litHits
		b.Run(kind+"/walk", func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				foldedLits.walk(s, 0, 0, len(s), &h)
			}
		})
		b.Run(kind+"/scan", func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				foldedLits.scan(s, &h)
			}
		})
	}
}
