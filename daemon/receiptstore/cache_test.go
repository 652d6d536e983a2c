package receiptstore

import (
	"context"
	"database/sql"
	"testing"
)

// TestEveryConnectionCachesAtMost512KiB holds each of the store's pooled
// SQLite connections, all at once, and asks each for its page cache bound:
// a connection left at SQLite's default caches up to 2,000 KiB of pages,
// which modernc's allocator holds in twice that (4 connections that had
// read 6,000 receipts: 20 MB of SQLite heap, against 6.4 MB at 512 KiB).
func TestEveryConnectionCachesAtMost512KiB(t *testing.T) {
	s, _, _ := newStore(t)
	checkCacheBound(t, s.db, maxConns)
}

// checkCacheBound takes n connections of db at once (so n distinct ones) and
// fails t unless each has a page cache of at most 512 KiB (CachePragma).
func checkCacheBound(t testing.TB, db *sql.DB, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var kib int
		if err := c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&kib); err != nil {
			t.Fatal(err)
		}
		if kib != -512 {
			t.Errorf("connection %d of %d: cache_size %d, want -512 (KiB; a positive value is pages)", i+1, n, kib)
		}
	}
}
