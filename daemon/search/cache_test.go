package search

import (
	"context"
	"testing"
)

// TestIndexConnectionsCacheAtMost512KiB holds both of the index's SQLite
// connections at once and asks each for its page cache bound, as the
// receipt store's TestEveryConnectionCachesAtMost512KiB (SQLite's default
// is 2,000 KiB a connection).
func TestIndexConnectionsCacheAtMost512KiB(t *testing.T) {
	f := newFixture(t)
	f.add("uid:1000", "pwd", "/home/dev\n")
	f.idx.mu.Lock()
	defer f.idx.mu.Unlock()
	ctx := context.Background()
	for i := range 2 {
		c, err := f.idx.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var kib int
		if err := c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&kib); err != nil {
			t.Fatal(err)
		}
		if kib != -512 {
			t.Errorf("connection %d of 2: cache_size %d, want -512 (KiB; a positive value is pages)", i+1, kib)
		}
	}
}
