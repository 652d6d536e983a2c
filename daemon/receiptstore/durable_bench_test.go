package receiptstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	// Alternate rounds so that load from elsewhere hits all alike.
	ways := []struct {
		name      string
		run       func() (time.Duration, time.Duration)
		wall, cpu []time.Duration
	}{
		{name: "append + fdatasync (file grows)", run: appendSync},
		{name: "preallocated log: write in place + fdatasync", run: prealloc},
		{name: "intent today: SQLite insert, synchronous=FULL", run: sqliteIntent},
		{name: "receipt today: Store.Append (Prepare, Seal, insert)", run: sqliteReceipt},
	}
	for range 3 {
		for i := range ways {
			w, c := ways[i].run()
			ways[i].wall, ways[i].cpu = append(ways[i].wall, w), append(ways[i].cpu, c)
		}
	}
	fmt.Printf("\ndurable writes (%d-byte record, median of 3 alternating rounds of %d): wall, then process CPU per write\n", len(body), n)
	a, ac := medianDuration(ways[0].wall), medianDuration(ways[0].cpu)
	for _, w := range ways {
		m, c := medianDuration(w.wall), medianDuration(w.cpu)
		fmt.Printf("%-52s %8.0f µs %6.2fx %8.0f µs CPU %6.2fx\n", w.name, us(m), float64(m)/float64(a), us(c), float64(c)/float64(ac))
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
