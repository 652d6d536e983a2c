package receiptstore

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/termd/termd/receipt"
)

// Receipts and intents arriving together share one transaction (one fsync);
// each caller is answered only after that commit; the chain stays strict
// (seq 1..n without gaps, every link verifies); a receipt the schema refuses
// and a duplicate intent in the same batch fail alone.
func TestGroupCommit(t *testing.T) {
	s, k, path := newStore(t)
	const n = 24
	// Hold the writer's lock so the writes queue up behind one commit, as
	// they do behind an fsync under load.
	s.mu.Lock()
	var queued atomic.Int64
	var wg sync.WaitGroup
	stored := make([]*receipt.Receipt, n)
	errs := make([]error, n)
	intentErrs := make([]error, n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			r := sampleReceipt(k, receipt.StatusSucceeded, fmt.Sprintf("s%d", i))
			if i == 5 {
				r.BinarySHA256 = "not-a-hash"
			}
			queued.Add(1)
			stored[i], errs[i] = s.Append(r)
		}()
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("intent-%d", i)
			if i == 7 {
				id = "intent-6" // a duplicate: one of the two fails
			}
			queued.Add(1)
			intentErrs[i] = s.AppendIntent(Intent{ExecutionID: id, PlanID: "p", SessionID: "s"})
		}()
	}
	for queued.Load() < 2*n {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the last ones reach the queue
	before := s.commits.Load()
	w0, _ := s.WriteStats()
	s.mu.Unlock()
	wg.Wait()

	if errs[5] == nil || !strings.Contains(errs[5].Error(), "schema") {
		t.Fatalf("the schema-invalid receipt in a batch: %v", errs[5])
	}
	seqs := map[int64]bool{}
	for i, err := range errs {
		if i == 5 {
			continue
		}
		if err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
		seqs[stored[i].Seq] = true
	}
	for seq := int64(1); seq < n; seq++ {
		if !seqs[seq] {
			t.Fatalf("seq %d missing: chain positions %v", seq, seqs)
		}
	}
	if failed := btoi(intentErrs[6] != nil) + btoi(intentErrs[7] != nil); failed != 1 {
		t.Fatalf("duplicate intents: %v / %v", intentErrs[6], intentErrs[7])
	}
	commits := s.commits.Load() - before
	if commits > 3 {
		t.Fatalf("%d writes took %d commits; queued writes should share a commit", 2*n, commits)
	}
	t.Logf("%d writes in %d commits", 2*n, commits)
	if w, c := s.WriteStats(); w-w0 != 2*n-2 || c-before != commits {
		t.Fatalf("WriteStats: %d writes in %d commits; want the %d that succeeded in %d", w-w0, c-before, 2*n-2, commits)
	}

	// Everything acknowledged is there after reopening, and verifies.
	s.Close()
	s2, err := Open(path, k)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if checked, bad, err := s2.VerifyChain(); err != nil || bad != 0 || checked != n-1 {
		t.Fatalf("chain after reopen: checked %d bad %d %v", checked, bad, err)
	}
	open, err := s2.RecoverIntents()
	if err != nil || len(open) != n-1 {
		t.Fatalf("intents after reopen: %d %v", len(open), err)
	}
	next, err := s2.Append(sampleReceipt(k, receipt.StatusFailed, "s"))
	if err != nil || next.Seq != n {
		t.Fatalf("the chain continues at %d: %v %v", n, next, err)
	}
}

// Writes after Close fail instead of hanging.
func TestAppendAfterClose(t *testing.T) {
	s, k, _ := newStore(t)
	s.Close()
	done := make(chan error, 1)
	go func() { _, err := s.Append(sampleReceipt(k, receipt.StatusSucceeded, "s")); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("Append after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Append after Close hangs")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// AppendIntentTimed and AppendTimed say where a write's time went: each
// part is filled in and together they are the call's time; a failed write
// leaves them unset.
func TestWriteTimes(t *testing.T) {
	s, k, _ := newStore(t)
	var it, rt WriteTimes
	start := time.Now()
	if err := s.AppendIntentTimed(Intent{ExecutionID: "e1", PlanID: "p", SessionID: "s"}, &it); err != nil {
		t.Fatal(err)
	}
	intentTook := time.Since(start)
	start = time.Now()
	if _, err := s.AppendTimed(sampleReceipt(k, receipt.StatusSucceeded, "s"), &rt); err != nil {
		t.Fatal(err)
	}
	receiptTook := time.Since(start)
	for _, c := range []struct {
		name string
		w    WriteTimes
		took time.Duration
	}{{"intent", it, intentTook}, {"receipt", rt, receiptTook}} {
		if c.w.Encode <= 0 || c.w.Wait <= 0 || c.w.Apply <= 0 || c.w.Commit <= 0 {
			t.Errorf("%s: a part is missing: %+v", c.name, c.w)
		}
		if sum := c.w.Encode + c.w.Wait + c.w.Apply + c.w.Commit; sum > c.took {
			t.Errorf("%s: parts %v add up to more than the call's %v", c.name, sum, c.took)
		}
	}
	var failed WriteTimes
	if err := s.AppendIntentTimed(Intent{ExecutionID: "e1", PlanID: "p", SessionID: "s"}, &failed); err == nil {
		t.Fatal("a duplicate intent was accepted")
	}
	if failed != (WriteTimes{}) {
		t.Errorf("a failed write's times: %+v", failed)
	}
}

// Group commit survives kill -9: eight writers append intents and receipts
// at once, so their writes share transactions; the helper is killed while
// batches are in flight, and every intent and receipt any writer was told
// was committed is there afterwards (killRound's checks), three times over.
func TestKill9LosesNothingAckedConcurrently(t *testing.T) {
	dir := t.TempDir()
	acked := map[int64]string{}
	intents := map[string]bool{}
	shared := false
	for round, stopAfter := range []int{60, 25, 90} {
		if killRound(t, dir, 8, round, stopAfter, acked, intents) {
			shared = true
		}
	}
	if !shared {
		t.Fatal("no two writes were ever acknowledged by one transaction: the test did not exercise group commit")
	}
	if len(acked) < 60+25+90 {
		t.Fatalf("only %d acked", len(acked))
	}
}

// TestFailedCommitIsRolledBack: a COMMIT that fails leaves SQLite's
// transaction open (here a deferred foreign key the spawn record breaks);
// the writer rolls it back, so the batch's caller gets the error, nothing
// of it is stored, and the next write commits as usual (without the
// rollback its BEGIN failed: a transaction within a transaction).
func TestFailedCommitIsRolledBack(t *testing.T) {
	s, _, _ := newStore(t)
	err := s.submit(func() error {
		if err := s.w.exec(`PRAGMA defer_foreign_keys = ON`); err != nil {
			return err
		}
		return s.w.exec(`INSERT INTO intent_spawns(execution_id, pid, pgid, cgroup_path, at_ns) VALUES ('no-such-intent', 1, 1, '', 0)`)
	}, time.Now(), nil)
	if err == nil || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("a commit that breaks a deferred foreign key: %v, want its commit's error", err)
	}
	if err := s.AppendIntent(Intent{ExecutionID: "after", PlanID: "p", SessionID: "s"}); err != nil {
		t.Fatalf("the write after a failed commit: %v", err)
	}
	var spawns int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM intent_spawns`).Scan(&spawns); err != nil || spawns != 0 {
		t.Fatalf("spawn records after the failed commit: %d, %v; want none", spawns, err)
	}
	if open, err := s.RecoverIntents(); err != nil || len(open) != 1 || open[0].ExecutionID != "after" {
		t.Fatalf("intents: %v, %v; want the one written after the failed commit", open, err)
	}
}
