package receiptstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/termd/termd/receipt"
)

// The storage budgets' figure (StoredSince) answered from memory is what the
// database holds, for each requester and for everyone, after appends, a
// refused append, a reopen and a prune; a question older than the window
// still gets the database's answer.
func TestStoredSinceMatchesTheDatabase(t *testing.T) {
	s, k, path := newStore(t)
	now := time.Now()
	add := func(s *Store, ago time.Duration, uid int) {
		t.Helper()
		r := sampleReceipt(k, receipt.StatusSucceeded, "s")
		r.StartedAt = now.Add(-ago)
		r.FinishedAt = r.StartedAt.Add(time.Second)
		r.Requester.ID = fmt.Sprintf("uid:%d", uid)
		r.Stdout = fmt.Sprintf("%0*d", 10+int(ago/time.Minute), 0)
		r.StdoutBytes = int64(len(r.Stdout))
		r.StdoutDigest = k.Digest([]byte(r.Stdout))
		if _, err := s.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *Store, when string) {
		t.Helper()
		for _, who := range []string{"", "uid:1000", "uid:1001", "uid:9"} {
			for _, since := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 48 * time.Hour} {
				got, err := s.StoredSince(who, now.Add(-since))
				if err != nil {
					t.Fatal(err)
				}
				var want int64
				if err := s.db.QueryRow(`SELECT COALESCE(SUM(length(body)), 0) FROM receipts WHERE started_ns >= ? AND (? = '' OR requester = ?)`,
					now.Add(-since).UnixNano(), who, who).Scan(&want); err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("%s: StoredSince(%q, %v ago) = %d, the database says %d", when, who, since, got, want)
				}
			}
		}
	}
	for i, ago := range []time.Duration{30 * time.Hour, 23 * time.Hour, 2 * time.Hour, 30 * time.Minute, 10 * time.Second} {
		add(s, ago, 1000+i%2)
	}
	bad := sampleReceipt(k, receipt.StatusSucceeded, "s")
	bad.StartedAt, bad.BinarySHA256 = now, "not-a-hash"
	if _, err := s.Append(bad); err == nil {
		t.Fatal("a schema-invalid receipt was appended")
	}
	check(s, "after appends")
	if n, _ := s.StoredSince("", now.Add(-time.Hour)); n == 0 {
		t.Fatal("nothing counted in the last hour")
	}
	s.Close()
	s2, err := Open(path, k)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	check(s2, "after reopening")
	add(s2, time.Second, 1000)
	check(s2, "after reopening and appending")
	if _, err := s2.Prune(now.Add(-90*time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	check(s2, "after a prune")
}
