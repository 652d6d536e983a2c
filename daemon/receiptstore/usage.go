package receiptstore

import (
	"fmt"
	"sync"
	"time"
)

// usage accounts in memory for the receipts started in the last
// usageWindow, so that the storage budget's question before every
// execution — how many bytes of receipts a requester stored since t —
// is a sum over memory rather than a scan of every recent receipt body
// (about 150 ms per execution with 10,000 receipts in the day, and a
// pooled connection held meanwhile). The single writer adds what it
// commits; Open and Prune load it from the database.
type usage struct {
	mu      sync.Mutex
	loaded  bool
	since   int64 // entries cover every receipt started at or after since (ns)
	entries []usageEntry
	total   int64 // bytes of every receipt held (TotalBytes)
}

type usageEntry struct {
	started   int64 // started_ns
	requester string
	size      int64 // length of the stored body
}

// usageWindow is longer than the budgets' day, so a query for "the last 24
// hours" is always inside it; entries older than it are dropped hourly.
const usageWindow = 25 * time.Hour

// loadUsage reads the window from the database. Called at Open and, with
// s.mu held, after a prune.
func (s *Store) loadUsage() error {
	since := time.Now().Add(-usageWindow).UnixNano()
	rows, err := s.db.Query(`SELECT started_ns, requester, length(body) FROM receipts WHERE started_ns >= ? ORDER BY seq`, since)
	if err != nil {
		return fmt.Errorf("receipt store: reading recent usage: %w", err)
	}
	defer rows.Close()
	var entries []usageEntry
	for rows.Next() {
		var e usageEntry
		if err := rows.Scan(&e.started, &e.requester, &e.size); err != nil {
			return fmt.Errorf("receipt store: reading recent usage: %w", err)
		}
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("receipt store: reading recent usage: %w", err)
	}
	var total int64
	if err := s.db.QueryRow(`SELECT COALESCE(SUM(length(body)), 0) FROM receipts`).Scan(&total); err != nil {
		return fmt.Errorf("receipt store: reading usage: %w", err)
	}
	s.usage.mu.Lock()
	s.usage.loaded, s.usage.since, s.usage.entries, s.usage.total = true, since, entries, total
	s.usage.mu.Unlock()
	return nil
}

// addUsage records committed receipts.
func (s *Store) addUsage(es []usageEntry) {
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.loaded {
		return
	}
	if cut := time.Now().Add(-usageWindow).UnixNano(); cut-u.since > int64(time.Hour) {
		kept := u.entries[:0]
		for _, e := range u.entries {
			if e.started >= cut {
				kept = append(kept, e)
			}
		}
		clear(u.entries[len(kept):])
		u.entries, u.since = kept, cut
	}
	for _, e := range es {
		u.total += e.size
		if e.started >= u.since {
			u.entries = append(u.entries, e)
		}
	}
}

// storedSince answers from memory when t is inside the window.
func (s *Store) storedSince(requester string, t time.Time) (int64, bool) {
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	tn := t.UnixNano()
	if !u.loaded || tn < u.since {
		return 0, false
	}
	var n int64
	for _, e := range u.entries {
		if e.started >= tn && (requester == "" || e.requester == requester) {
			n += e.size
		}
	}
	return n, true
}
