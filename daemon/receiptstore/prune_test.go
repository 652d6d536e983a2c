package receiptstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/receipt"
)

var day0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// appendDays appends one receipt per day from day `from` on (day0 + i days),
// each with an intent, and returns the stored receipts.
func appendDays(t *testing.T, s *Store, k *Keys, from, n int) []*receipt.Receipt {
	t.Helper()
	var out []*receipt.Receipt
	for i := from; i < from+n; i++ {
		r := sampleReceipt(k, receipt.StatusSucceeded, "s")
		r.StartedAt = day0.Add(time.Duration(i) * 24 * time.Hour)
		r.FinishedAt = r.StartedAt.Add(42 * time.Millisecond)
		r.ExecutionID = fmt.Sprintf("exec-%d", i)
		if err := s.AppendIntent(Intent{ExecutionID: r.ExecutionID, PlanID: "plan-" + r.ExecutionID, SessionID: "s", StartedAt: r.StartedAt}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got)
	}
	return out
}

func mustVerify(t *testing.T, s *Store, want int) {
	t.Helper()
	checked, bad, err := s.VerifyChain()
	if err != nil || bad != 0 || checked != want {
		t.Fatalf("VerifyChain = %d checked, bad seq %d, %v; want %d checked", checked, bad, err, want)
	}
}

func TestPruneLeavesAVerifiableChain(t *testing.T) {
	s, k, _ := newStore(t)
	rs := appendDays(t, s, k, 0, 10)
	// An intent nobody closed (a crash) must survive a prune.
	if err := s.AppendIntent(Intent{ExecutionID: "still-open", PlanID: "plan-open", SessionID: "s", StartedAt: day0}); err != nil {
		t.Fatal(err)
	}

	c, err := s.Prune(day0.Add(3*24*time.Hour), "uid:0")
	if err != nil {
		t.Fatal(err)
	}
	if c.FirstSeq != 1 || c.HeadSeq != 3 || c.Count != 3 || c.HeadHash != chainHashOf(t, rs[2]) || c.PrevCheckpoint != "" {
		t.Fatalf("checkpoint %+v", c)
	}
	if !c.From.Equal(rs[0].StartedAt) || !c.Until.Equal(rs[2].StartedAt) || c.By != "uid:0" {
		t.Fatalf("checkpoint range %v–%v by %q", c.From, c.Until, c.By)
	}
	if n, _ := s.Count(); n != 7 {
		t.Fatalf("%d receipts left, want 7", n)
	}
	if _, err := s.GetSeq(3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pruned seq 3 still readable: %v", err)
	}
	mustVerify(t, s, 7)
	// The first kept receipt verifies on its own against the checkpoint;
	// a pruned one says it was pruned.
	if err := s.VerifyReceipt(rs[3]); err != nil {
		t.Fatalf("the first receipt after the checkpoint: %v", err)
	}
	if err := s.VerifyReceipt(rs[1]); err == nil || !strings.Contains(err.Error(), "pruned") {
		t.Fatalf("a pruned receipt: %v", err)
	}
	open, err := s.RecoverIntents()
	if err != nil || len(open) != 1 || open[0].ExecutionID != "still-open" {
		t.Fatalf("open intents after prune: %v %v (intents closed by pruned receipts must not reopen)", open, err)
	}

	// Nothing older than the cut-off at the start of the chain.
	if _, err := s.Prune(day0.Add(3*24*time.Hour), "uid:0"); !errors.Is(err, ErrNothingToPrune) {
		t.Fatalf("second prune at the same date: %v", err)
	}

	// The chain goes on; a second prune links to the first checkpoint.
	appendDays(t, s, k, 10, 2)
	mustVerify(t, s, 9)
	c2, err := s.Prune(day0.Add(6*24*time.Hour), "token:ops")
	if err != nil {
		t.Fatal(err)
	}
	if c2.FirstSeq != 4 || c2.HeadSeq != 6 || c2.PrevCheckpoint == "" {
		t.Fatalf("second checkpoint %+v", c2)
	}
	mustVerify(t, s, 6)

	// Pruning everything leaves only checkpoints; the next receipt goes on
	// from the pruned head.
	if _, err := s.Prune(day0.Add(100*24*time.Hour), "uid:0"); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s, 0)
	if seq, hash, err := s.Head(); err != nil || seq != 12 || hash == "" {
		t.Fatalf("head of a fully pruned chain: %d %q %v", seq, hash, err)
	}
	next := appendDays(t, s, k, 20, 1)[0]
	if next.Seq != 13 {
		t.Fatalf("the receipt after a full prune got seq %d, want 13", next.Seq)
	}
	mustVerify(t, s, 1)
}

// A receipt that started before the cut-off but after a newer one (a long
// command) ends the pruned prefix at the first receipt not older than it.
func TestPruneStopsAtTheFirstNewerReceipt(t *testing.T) {
	s, k, _ := newStore(t)
	appendDays(t, s, k, 0, 2)
	appendDays(t, s, k, 9, 1) // seq 3: newer than the cut-off
	appendDays(t, s, k, 2, 2) // seq 4, 5: older, but after seq 3 in the chain
	c, err := s.Prune(day0.Add(5*24*time.Hour), "uid:0")
	if err != nil || c.HeadSeq != 2 {
		t.Fatalf("prune: %+v %v; want the prefix to end at seq 2", c, err)
	}
	mustVerify(t, s, 3)
}

func chainHashOf(t *testing.T, r *receipt.Receipt) string {
	t.Helper()
	b, err := receipt.CanonicalBytes(r)
	if err != nil {
		t.Fatal(err)
	}
	return receipt.ChainHash(b)
}

// After a prune, tampering is still caught: the store refuses to delete a
// receipt no checkpoint covers, and removing, forging or unlinking
// checkpoints or the first kept receipt breaks verification.
func TestPrunedChainDetectsTampering(t *testing.T) {
	dropCheckpointTriggers := []string{`DROP TRIGGER checkpoints_no_update`, `DROP TRIGGER checkpoints_no_delete`}
	cases := []struct {
		name    string
		stmts   []string
		wantBad int64
		want    string
	}{
		{"delete the checkpoint", append(dropCheckpointTriggers, `DELETE FROM checkpoints`), 1, "no signed checkpoint covers seq 1–3"},
		{"delete the first kept receipt", []string{`DELETE FROM receipts WHERE seq = 4`}, 4, "checkpoint covers seq 1–3 but the chain goes on at seq 5"},
		{"alter the checkpoint's count", append(dropCheckpointTriggers, `UPDATE checkpoints SET body = replace(body, '"count":3', '"count":2')`), 3, "do not match"},
		{"alter the checkpoint's head hash", append(dropCheckpointTriggers, flipCheckpointStmt(`"head_hash":"`)), 3, "signature does not match"},
		{"alter the first kept receipt's prev_hash", []string{flipStmt(4, `"prev_hash":"`)}, 4, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, k, path := newStore(t)
			appendDays(t, s, k, 0, 6)
			if _, err := s.Prune(day0.Add(3*24*time.Hour), "uid:0"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.db.Exec(`DELETE FROM receipts WHERE seq = 5`); err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Fatalf("deleting a receipt no checkpoint covers: %v", err)
			}
			s.Close()
			tamper(t, path, c.stmts...)
			_, bad, err := verifyAt(t, path, k)
			if err == nil || bad != c.wantBad || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("VerifyChain = bad seq %d, %v; want bad seq %d saying %q", bad, err, c.wantBad, c.want)
			}
			t.Logf("detected: %v", err)
		})
	}
}

func flipCheckpointStmt(marker string) string {
	return strings.Replace(strings.Replace(flipStmt(0, marker), "UPDATE receipts", "UPDATE checkpoints", 1), "WHERE seq = 0", "", 1)
}

// A prune refuses a chain that does not verify: it would destroy the
// evidence.
func TestPruneRefusesABrokenChain(t *testing.T) {
	s, k, path := newStore(t)
	appendDays(t, s, k, 0, 5)
	s.Close()
	tamper(t, path, `UPDATE receipts SET body = replace(body, 'git status', 'git statuS') WHERE seq = 2`)
	s, err := Open(path, k)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prune(day0.Add(4*24*time.Hour), "uid:0"); err == nil || !strings.Contains(err.Error(), "destroy the evidence") {
		t.Fatalf("prune of a broken chain: %v", err)
	}
	if n, _ := s.Count(); n != 5 {
		t.Fatalf("%d receipts left", n)
	}
}

// kill -9 in the middle of a prune leaves either the old chain or the
// checkpoint and the shorter chain, and both verify.
const pruneHelperEnv = "TERMD_RECEIPT_PRUNE_HELPER"

func pruneHelper(dir string) int {
	k, err := LoadOrCreateKeys(filepath.Join(dir, "keys"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := Open(filepath.Join(dir, "receipts.db"), k)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	pruneHook = func(stage string) { fmt.Println(stage) }
	_, cut := crashChain()
	if _, err := s.Prune(day0.Add(time.Duration(cut)*24*time.Hour), "uid:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("done")
	return 0
}

// crashChain is how long the crash test's chain is and where it cuts
// (shorter under -race).
func crashChain() (length, cut int) {
	if raceDetector {
		return 500, 375
	}
	return 2000, 1500
}

func TestKill9DuringPrune(t *testing.T) {
	pruneCrashChain, pruneCrashCut := crashChain()
	// One chain, copied for each round.
	src := t.TempDir()
	k, err := LoadOrCreateKeys(filepath.Join(src, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(src, "receipts.db"), k)
	if err != nil {
		t.Fatal(err)
	}
	var batch []*receipt.Receipt
	for i := 0; i < pruneCrashChain; i++ {
		r := sampleReceipt(k, receipt.StatusSucceeded, "s")
		r.StartedAt = day0.Add(time.Duration(i) * 24 * time.Hour)
		r.FinishedAt = r.StartedAt
		r.ExecutionID = fmt.Sprintf("exec-%d", i)
		batch = append(batch, r)
	}
	if err := s.appendBatch(batch); err != nil {
		t.Fatal(err)
	}
	s.Close()

	outcomes := map[string]int{}
	for round, delay := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond, time.Hour} {
		dir := t.TempDir()
		copyDir(t, src, dir)
		cmd, stdout, stderr := startHelper(t, pruneHelperEnv+"="+dir)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "deleting" {
				break
			}
		}
		if delay < time.Hour {
			time.Sleep(delay)
			cmd.Process.Signal(syscall.SIGKILL)
		}
		go io.Copy(io.Discard, stdout)
		err := cmd.Wait()
		if delay == time.Hour && err != nil {
			t.Fatalf("prune without a kill: %v; %s", err, stderr.String())
		}
		s, err := Open(filepath.Join(dir, "receipts.db"), k)
		if err != nil {
			t.Fatal(err)
		}
		count, _ := s.Count()
		n := int(count)
		cp, _, _ := s.LastCheckpoint()
		switch {
		case cp == nil && n == pruneCrashChain:
			outcomes["old chain"]++
			mustVerify(t, s, pruneCrashChain)
		case cp != nil && cp.HeadSeq == int64(pruneCrashCut) && n == pruneCrashChain-pruneCrashCut:
			outcomes["checkpoint + shorter chain"]++
			mustVerify(t, s, pruneCrashChain-pruneCrashCut)
		default:
			t.Fatalf("round %d (kill after %v): %d receipts, checkpoint %+v: neither the old chain nor the pruned one", round, delay, n, cp)
		}
		s.Close()
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes["old chain"] == 0 {
		t.Errorf("no kill landed before the commit (outcomes %v): the test did not exercise a torn prune", outcomes)
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, fi.Mode().Perm())
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}
