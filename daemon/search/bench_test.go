package search

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/daemon/receiptstore"
)

// benchReceipts receipts with a few KiB of log-like output each, appended
// concurrently so they share the store's group commits.
const benchReceipts = 5000

// BenchmarkSearch prints, for a store of benchReceipts receipts: building
// the index from scratch per receipt, a phrase search (trigram index), a
// one-character search (scan), and as the baseline the store's own newest
// page (ListReceipts' query).
func BenchmarkSearch(b *testing.B) {
	f := newBenchFixture(b)
	b.Run("rebuild-per-receipt", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := f.idx.Rebuild(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*benchReceipts), "µs/receipt")
	})
	b.Run("baseline-list-newest-20", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := f.store.List(receiptstore.Filter{Limit: 20, Desc: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, phrase := range []string{"migration 4242 applied", "error", "*"} {
		b.Run("search-"+strings.ReplaceAll(phrase, " ", "_"), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := f.idx.Search(Query{Phrase: phrase}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func newBenchFixture(b *testing.B) *fixture {
	b.Helper()
	f := newFixture(b)
	var line strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&line, "2026-03-01T12:00:%02d INFO worker %d processed batch ok\n", i, i)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out := line.String() + fmt.Sprintf("migration %d applied\n", i)
				if i%10 == 0 {
					out += "error: something failed\n"
				}
				f.add("uid:1", fmt.Sprintf("make migrate N=%d", i), out)
			}
		}()
	}
	for i := 0; i < benchReceipts; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if _, err := f.idx.CatchUp(context.Background(), time.Time{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	return f
}
