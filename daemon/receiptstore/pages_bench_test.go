package receiptstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// TestBenchExecutionWrites prints what one execution's durable writes cost
// the store (an intent with its draft, then its receipt; each its own
// commit), wall and process CPU, against two bare appends + fdatasync of
// the same sizes, in alternating rounds of one run (TERMD_BENCH=1). A second
// store with the full plan_id, approver and intents_plan indexes (as before
// they were made partial or dropped) runs in the same rounds.
func TestBenchExecutionWrites(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the receipt benchmarks")
	}
	const n, rounds = 100, 9
	s, k, _ := newStore(t)
	full, _, _ := newStore(t)
	for _, q := range []string{`CREATE INDEX IF NOT EXISTS receipts_plan ON receipts(plan_id)`,
		`CREATE INDEX IF NOT EXISTS receipts_approver ON receipts(approver)`, `CREATE INDEX IF NOT EXISTS intents_plan ON intents(plan_id)`} {
		if _, err := full.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	draft := sampleReceipt(k, receipt.StatusSucceeded, "bench")
	inBody, _ := json.Marshal(Intent{ExecutionID: uuid.NewString(), PlanID: uuid.NewString(), SessionID: "s", Receipt: draft})
	rcBody, _ := receipt.CanonicalBytes(draft)
	bare := func() (time.Duration, time.Duration) {
		f, err := os.OpenFile(filepath.Join(t.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		start, cpu := time.Now(), processCPU()
		for range n {
			for _, b := range [][]byte{inBody, rcBody} {
				if _, err := f.Write(b); err != nil {
					t.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					t.Fatal(err)
				}
			}
		}
		return time.Since(start) / n, (processCPU() - cpu) / n
	}
	store := func(s *Store) func() (time.Duration, time.Duration) {
		return func() (time.Duration, time.Duration) {
			start, cpu := time.Now(), processCPU()
			for range n {
				r := sampleReceipt(k, receipt.StatusSucceeded, uuid.NewString())
				r.ExecutionID, r.PlanID = uuid.NewString(), uuid.NewString()
				if err := s.AppendIntent(Intent{ExecutionID: r.ExecutionID, PlanID: r.PlanID, SessionID: r.SessionID, Receipt: r}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			return time.Since(start) / n, (processCPU() - cpu) / n
		}
	}
	ways := []struct {
		name       string
		run        func() (time.Duration, time.Duration)
		wall, cpu  []time.Duration
		calls, out int64 // write syscalls and bytes written, over all rounds
	}{
		{name: "bare: 2 x (append + fdatasync)", run: bare},
		{name: "store: intent + receipt", run: store(s)},
		{name: "store with the full indexes: intent + receipt", run: store(full)},
	}
	for range rounds {
		for i := range ways {
			calls, out := procWrites(t)
			w, c := ways[i].run()
			calls2, out2 := procWrites(t)
			ways[i].wall, ways[i].cpu = append(ways[i].wall, w), append(ways[i].cpu, c)
			ways[i].calls, ways[i].out = ways[i].calls+calls2-calls, ways[i].out+out2-out
		}
	}
	fmt.Printf("\nper execution (median of %d alternating rounds of %d): wall, process CPU, write syscalls, KiB written\n", rounds, n)
	a, ac := medianDuration(ways[0].wall), medianDuration(ways[0].cpu)
	for _, w := range ways {
		m, c := medianDuration(w.wall), medianDuration(w.cpu)
		fmt.Printf("%-48s %8.0f µs %6.2fx %8.0f µs CPU %6.2fx %6.1f writes %6.1f KiB\n", w.name, us(m), float64(m)/float64(a), us(c), float64(c)/float64(ac),
			float64(w.calls)/(n*rounds), float64(w.out)/1024/(n*rounds))
	}
}

// procWrites is the process's write syscalls and bytes written so far
// (/proc/self/io: syscw, wchar).
func procWrites(t *testing.T) (calls, bytes int64) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			fmt.Sscan(v, &calls)
		}
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			fmt.Sscan(v, &bytes)
		}
	}
	return calls, bytes
}
