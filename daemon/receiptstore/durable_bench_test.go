package receiptstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/google/uuid"
	"github.com/termd/termd/receipt"
)

// TestBenchDurableWrites prints issue 17 item 3's figures, each against a
// baseline measured in the same run (TERMD_BENCH=1; asserts nothing about
// time):
//   - the intent as written today (a SQLite insert committed with
//     synchronous=FULL) against a preallocated intent log: a file of fixed
//     size, zeroed and synced once, each record (length, CRC, body) written
//     in place and made durable with fdatasync, so the file's size never
//     changes and no metadata is flushed; and against a plain append+fdatasync;
//   - receipts appended by 64 goroutines at once (group commit) against the
//     same number appended one after another.
func TestBenchDurableWrites(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the receipt benchmarks")
	}
	s, k, _ := newStore(t)
	benchIntentWrites(t, s, k)

	benchGroupCommit(t, s, k)

	benchBudgetCheck(t)
}

// benchIntentWrites prints what making one intent durable costs: appended
// with fdatasync, written in place in a preallocated log, and as a SQLite
// insert (today), in alternating rounds of n: wall time and the process's
// CPU time (user and system, the store's writer goroutine included) per
// write.
func benchIntentWrites(t *testing.T, s *Store, k *Keys) {
	const n = 300
	draft := sampleReceipt(k, receipt.StatusSucceeded, "bench")
	body, err := receipt.CanonicalBytes(draft)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	appendSync := func() (time.Duration, time.Duration) {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("append-%d", time.Now().UnixNano())), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		start, cpu := time.Now(), processCPU()
		for range n {
			if _, err := f.Write(body); err != nil {
				t.Fatal(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start) / n, (processCPU() - cpu) / n
	}
	prealloc := func() (time.Duration, time.Duration) {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("ring-%d", time.Now().UnixNano())), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		size := int64(n+1) * int64(len(body)+8)
		if _, err := f.WriteAt(make([]byte, size), 0); err != nil { // zeroed, so no unwritten extents
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		rec := make([]byte, 8+len(body))
		binary.LittleEndian.PutUint32(rec, uint32(len(body)))
		binary.LittleEndian.PutUint32(rec[4:], crc32.ChecksumIEEE(body))
		copy(rec[8:], body)
		start, cpu := time.Now(), processCPU()
		var off int64
		for range n {
			if _, err := f.WriteAt(rec, off); err != nil {
				t.Fatal(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				t.Fatal(err)
			}
			off += int64(len(rec))
		}
		return time.Since(start) / n, (processCPU() - cpu) / n
	}
	sqliteIntent := func() (time.Duration, time.Duration) {
		start, cpu := time.Now(), processCPU()
		for i := range n {
			in := Intent{ExecutionID: fmt.Sprintf("e-%d-%d", time.Now().UnixNano(), i), PlanID: "p", SessionID: "s", Receipt: draft}
			if err := s.AppendIntent(in); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start) / n, (processCPU() - cpu) / n
	}
	sqliteReceipt := func() (time.Duration, time.Duration) {
		start, cpu := time.Now(), processCPU()
		for i := range n {
			r := sampleReceipt(k, receipt.StatusSucceeded, "bench")
			r.ExecutionID = fmt.Sprintf("e-%d-%d", time.Now().UnixNano(), i)
			if _, err := s.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start) / n, (processCPU() - cpu) / n
	}
	alternate(t, fmt.Sprintf("durable writes (%d-byte record, median of 3 alternating rounds of %d): wall, process CPU, write syscalls and KiB written per write", len(body), n), 3, n, []*way{
		{name: "append + fdatasync (file grows)", run: appendSync},
		{name: "preallocated log: write in place + fdatasync", run: prealloc},
		{name: "intent today: SQLite insert, synchronous=FULL", run: sqliteIntent},
		{name: "receipt today: Store.Append (Prepare, Seal, insert)", run: sqliteReceipt},
	})
}

// way is one way of making writes durable, timed in alternating rounds.
type way struct {
	name       string
	run        func() (wall, cpu time.Duration) // per write (or execution)
	wall, cpu  []time.Duration
	calls, out int64 // write syscalls and bytes written, over all rounds
}

// alternate runs each way once a round, so that load from elsewhere hits
// all alike, and prints their medians (and the first's multiples) and their
// writes, n per round.
func alternate(t *testing.T, title string, rounds, n int, ways []*way) {
	for range rounds {
		for _, w := range ways {
			calls, out := procWrites(t)
			wall, cpu := w.run()
			calls2, out2 := procWrites(t)
			w.wall, w.cpu = append(w.wall, wall), append(w.cpu, cpu)
			w.calls, w.out = w.calls+calls2-calls, w.out+out2-out
		}
	}
	fmt.Printf("\n%s\n", title)
	a, ac := medianDuration(ways[0].wall), medianDuration(ways[0].cpu)
	for _, w := range ways {
		m, c := medianDuration(w.wall), medianDuration(w.cpu)
		fmt.Printf("%-52s %8.0f µs %6.2fx %8.0f µs CPU %6.2fx %6.1f writes %6.1f KiB\n", w.name, us(m), float64(m)/float64(a), us(c), float64(c)/float64(ac),
			float64(w.calls)/float64(n*rounds), float64(w.out)/1024/float64(n*rounds))
	}
}

// processCPU is the process's CPU time so far (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchGroupCommit prints receipts appended by 64 writers at once (group
// commit) against the same number appended one after another, and checks
// the chain they made.
func benchGroupCommit(t *testing.T, s *Store, k *Keys) {
	// Group commit: 64 writers at once against one writer.
	const writers, per = 64, 8
	seq := func() time.Duration {
		start := time.Now()
		for range writers * per {
			if _, err := s.Append(sampleReceipt(k, receipt.StatusSucceeded, "seq")); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	par := func() (time.Duration, int64) {
		c0 := s.commits.Load()
		start := time.Now()
		var wg sync.WaitGroup
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range per {
					if _, err := s.Append(sampleReceipt(k, receipt.StatusSucceeded, "par")); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start), s.commits.Load() - c0
	}
	var sq, pr []time.Duration
	var commits int64
	for range 2 {
		sq = append(sq, seq())
		d, c := par()
		pr, commits = append(pr, d), c
	}
	total := float64(writers * per)
	fmt.Printf("%-52s %10.0f /s %8s\n", "receipts appended one after another", total/medianDuration(sq).Seconds(), "1.00x")
	fmt.Printf("%-52s %10.0f /s %7.2fx (%d commits for %d receipts)\n", fmt.Sprintf("receipts appended by %d writers at once", writers), total/medianDuration(pr).Seconds(), medianDuration(sq).Seconds()/medianDuration(pr).Seconds(), commits, writers*per)
	if _, bad, err := s.VerifyChain(); err != nil || bad != 0 {
		t.Fatalf("chain: %d %v", bad, err)
	}
}

// benchBudgetCheck prints the storage budget's question before every
// execution, with 10,000 receipts in the last day: from memory against the
// database scan, checking both give the same answer.
func benchBudgetCheck(t *testing.T) {
	// The storage budget's question before every execution, with 10,000
	// receipts in the last day: from memory against the database scan.
	s3, k3, _ := newStore(t)
	for done := 0; done < 10000; done += 2000 {
		rs := make([]*receipt.Receipt, 2000)
		for i := range rs {
			rs[i] = sampleReceipt(k3, receipt.StatusSucceeded, "day")
			rs[i].StartedAt = time.Now().Add(-time.Duration(i) * time.Second)
			rs[i].FinishedAt = rs[i].StartedAt
		}
		if err := s3.appendBatch(rs); err != nil {
			t.Fatal(err)
		}
	}
	day := time.Now().Add(-24 * time.Hour)
	var mem, scan []time.Duration
	for range 5 {
		start := time.Now()
		a, _ := s3.StoredSince("uid:1000", day)
		mem = append(mem, time.Since(start))
		start = time.Now()
		var b int64
		if err := s3.db.QueryRow(`SELECT COALESCE(SUM(length(body)), 0) FROM receipts WHERE started_ns >= ? AND (? = '' OR requester = ?)`, day.UnixNano(), "uid:1000", "uid:1000").Scan(&b); err != nil {
			t.Fatal(err)
		}
		scan = append(scan, time.Since(start))
		if a != b {
			t.Fatalf("StoredSince %d, the database %d", a, b)
		}
	}
	fmt.Printf("%-52s %10.0f µs %8s\n", "budget check over 10,000 receipts: database scan", us(medianDuration(scan)), "1.00x")
	fmt.Printf("%-52s %10.0f µs %7.4fx\n", "budget check over 10,000 receipts: in memory", us(medianDuration(mem)), float64(medianDuration(mem))/float64(medianDuration(scan)))
}

// medianDuration is the median of ds (ds is left as it was).
func medianDuration(ds []time.Duration) time.Duration {
	c := append([]time.Duration(nil), ds...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c[len(c)/2]
}

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
	alternate(t, fmt.Sprintf("per execution (median of %d alternating rounds of %d): wall, process CPU, write syscalls, KiB written", rounds, n), rounds, n, []*way{
		{name: "bare: 2 x (append + fdatasync)", run: bare},
		{name: "store: intent + receipt", run: store(s)},
		{name: "store with the full indexes: intent + receipt", run: store(full)},
	})
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
