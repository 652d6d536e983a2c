package harness

import (
	"context"
	"database/sql"
	"testing"
)

// SQLiteCacheKiB holds conns connections of db at once (so that many
// distinct ones, up to the pool's limit) and returns each one's page cache
// bound in KiB, from `PRAGMA cache_size` (negative there: a positive value
// would be pages).
func SQLiteCacheKiB(t testing.TB, db *sql.DB, conns int) []int {
	t.Helper()
	ctx := context.Background()
	var kib []int
	for range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var n int
		if err := c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&n); err != nil {
			t.Fatal(err)
		}
		kib = append(kib, -n)
	}
	return kib
}
