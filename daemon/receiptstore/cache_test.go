package receiptstore

import (
	"context"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// TestEveryConnectionCachesAtMost512KiB holds each of the store's pooled
// SQLite connections, all at once, and asks each for its page cache bound:
// a connection left at SQLite's default caches up to 2,000 KiB of pages,
// which modernc's allocator holds in twice that (4 connections that had
// read 6,000 receipts: 20 MB of SQLite heap, against 6.4 MB at 512 KiB).
func TestEveryConnectionCachesAtMost512KiB(t *testing.T) {
	s, _, _ := newStore(t)
	// The writer holds one of them (commit.go); the pool lends the others.
	var writer int
	if err := s.w.conn.QueryRowContext(context.Background(), "PRAGMA cache_size").Scan(&writer); err != nil {
		t.Fatal(err)
	}
	for i, kib := range append(harness.SQLiteCacheKiB(t, s.db, maxConns-1), -writer) {
		if kib != 512 {
			t.Errorf("connection %d of %d caches up to %d KiB of pages, want 512", i+1, maxConns, kib)
		}
	}
}
