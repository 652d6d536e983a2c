package receiptstore

import (
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/termd/termd/receipt"
)

// TestBenchPagesPerCommit prints what one execution's two commits write to
// the WAL (TERMD_BENCH=1): the frames (pages) of an intent's commit and of
// its receipt's, and which b-trees (tables, indexes, overflow pages) they
// belong to. It runs 300 executions first so the tables have depth, with
// random ids as the daemon's are.
func TestBenchPagesPerCommit(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the receipt benchmarks")
	}
	s, k, path := newStore(t)
	execution := func() (intent, rcpt []uint32) {
		id := uuid.NewString()
		draft := sampleReceipt(k, receipt.StatusSucceeded, "s-"+uuid.NewString())
		draft.ExecutionID, draft.PlanID = id, uuid.NewString()
		before := walFrames(t, path+"-wal")
		if err := s.AppendIntent(Intent{ExecutionID: id, PlanID: draft.PlanID, SessionID: draft.SessionID, Receipt: draft}); err != nil {
			t.Fatal(err)
		}
		mid := walFrames(t, path+"-wal")
		if _, err := s.Append(draft); err != nil {
			t.Fatal(err)
		}
		after := walFrames(t, path+"-wal")
		if len(mid) < len(before) || len(after) < len(mid) {
			return nil, nil // the WAL restarted after a checkpoint: not counted
		}
		return mid[len(before):], after[len(mid):]
	}
	for range 300 {
		execution()
	}
	const n = 50
	var in, rc []uint32
	rounds := 0
	for range n {
		a, b := execution()
		if a == nil {
			continue
		}
		rounds++
		in, rc = append(in, a...), append(rc, b...)
	}
	owner := pageOwners(t, s)
	fmt.Printf("\nWAL frames per commit (%d executions after 300): intent %.2f, receipt %.2f\n",
		rounds, float64(len(in))/float64(rounds), float64(len(rc))/float64(rounds))
	for _, c := range []struct {
		name  string
		pages []uint32
	}{{"intent", in}, {"receipt", rc}} {
		by := map[string]int{}
		for _, p := range c.pages {
			by[owner(p)]++
		}
		var names []string
		for name := range by {
			names = append(names, name)
		}
		sort.Strings(names)
		var parts []string
		for _, name := range names {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(by[name])/float64(rounds)))
		}
		fmt.Printf("  %-8s %s\n", c.name, strings.Join(parts, ", "))
	}
}

// walFrames is the page number of each valid frame in a WAL file, in order:
// the frames after the header whose salts are the header's.
func walFrames(t *testing.T, path string) []uint32 {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 32 {
		return nil
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:]))
	salt := b[16:24]
	var out []uint32
	for off := 32; off+24+pageSize <= len(b); off += 24 + pageSize {
		h := b[off : off+24]
		if string(h[8:16]) != string(salt) {
			break
		}
		out = append(out, binary.BigEndian.Uint32(h))
	}
	return out
}

// pageOwners says which b-tree holds a page (dbstat), "page 1" and
// "free" for the rest.
func pageOwners(t *testing.T, s *Store) func(uint32) string {
	rows, err := s.db.Query(`SELECT pageno, name, pagetype FROM dbstat`)
	if err != nil {
		t.Fatalf("dbstat: %v", err)
	}
	defer rows.Close()
	m := map[uint32]string{}
	for rows.Next() {
		var p uint32
		var name, typ string
		if err := rows.Scan(&p, &name, &typ); err != nil {
			t.Fatal(err)
		}
		if typ == "overflow" {
			name += " (overflow)"
		}
		m[p] = name
	}
	return func(p uint32) string {
		if name, ok := m[p]; ok {
			if p == 1 {
				return "page 1 (" + name + ")"
			}
			return name
		}
		return "free"
	}
}
