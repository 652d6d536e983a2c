package search

import (
	"testing"

	"github.com/termd/termd/internal/harness"
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
	for i, kib := range harness.SQLiteCacheKiB(t, f.idx.db, 2) {
		if kib != 512 {
			t.Errorf("connection %d of 2 caches up to %d KiB of pages, want 512", i+1, kib)
		}
	}
}
