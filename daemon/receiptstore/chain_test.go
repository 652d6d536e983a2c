package receiptstore

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/termd/termd/receipt"
)

// buildChain appends n receipts and closes the store, returning its path.
func buildChain(t *testing.T, n int) (string, *Keys) {
	t.Helper()
	s, k, path := newStore(t)
	for i := 0; i < n; i++ {
		if _, err := s.Append(sampleReceipt(k, receipt.Statuses[i%len(receipt.Statuses)], "s")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path, k
}

// tamper opens the SQLite file directly, as an attacker with file access
// would, drops the append-only triggers and runs the statements.
func tamper(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stmts = append([]string{
		`DROP TRIGGER receipts_no_update`,
		`DROP TRIGGER receipts_no_delete`,
	}, stmts...)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func verifyAt(t *testing.T, path string, k *Keys) (int, int64, error) {
	t.Helper()
	s, err := Open(path, k)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.VerifyChain()
}

func TestVerifyChainDetectsTampering(t *testing.T) {
	const n = 10
	cases := []struct {
		name    string
		stmts   []string
		wantBad int64
	}{
		{"flip a byte of the command", []string{`UPDATE receipts SET body = replace(body, 'git status', 'git statuS') WHERE seq = 4`}, 4},
		{"flip a byte of the HMAC signature", []string{flipStmt(6, `"signature":"`)}, 6},
		{"flip a byte of the Ed25519 signature", []string{flipStmt(7, `"signature_ed25519":"`)}, 7},
		{"flip a byte of prev_hash", []string{flipStmt(3, `"prev_hash":"`)}, 3},
		{"flip the stored hash", []string{`UPDATE receipts SET hash = substr(hash, 2) || substr(hash, 1, 1) WHERE seq = 9`}, 9},
		{"delete one", []string{`DELETE FROM receipts WHERE seq = 5`}, 5},
		{"delete the first", []string{`DELETE FROM receipts WHERE seq = 1`}, 1},
		{"reorder two bodies", []string{
			`UPDATE receipts SET seq = -1 WHERE seq = 3`,
			`UPDATE receipts SET seq = 3 WHERE seq = 8`,
			`UPDATE receipts SET seq = 8 WHERE seq = -1`,
		}, 3},
		{"renumber after a deletion", []string{
			`DELETE FROM receipts WHERE seq = 6`,
			`UPDATE receipts SET seq = seq - 1 WHERE seq > 6`,
		}, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, k := buildChain(t, n)
			if checked, bad, err := verifyAt(t, path, k); err != nil || bad != 0 || checked != n {
				t.Fatalf("before tampering: %d %d %v", checked, bad, err)
			}
			tamper(t, path, c.stmts...)
			checked, bad, err := verifyAt(t, path, k)
			if err == nil || bad != c.wantBad {
				t.Fatalf("VerifyChain = checked %d, bad seq %d, %v; want bad seq %d", checked, bad, err, c.wantBad)
			}
			if checked != int(c.wantBad-1) {
				t.Errorf("checked %d receipts before the bad one, want %d", checked, c.wantBad-1)
			}
			t.Logf("detected: %v", err)
		})
	}
}

// flipStmt changes the first hex digit after marker in the body at seq.
func flipStmt(seq int, marker string) string {
	m := strings.ReplaceAll(marker, "'", "''")
	pos := fmt.Sprintf("instr(body, '%s') + %d", m, len(marker))
	return fmt.Sprintf(`UPDATE receipts SET body = substr(body, 1, %[1]s - 1) ||
		CASE CAST(substr(body, %[1]s, 1) AS TEXT) WHEN '0' THEN '1' ELSE '0' END ||
		substr(body, %[1]s + 1) WHERE seq = %[2]d`, pos, seq)
}

// The kill -9 test re-executes the test binary as a writer that appends in
// a loop and reports each acknowledged seq on stdout.
const helperEnv = "TERMD_RECEIPT_KILL_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(killHelper(dir))
	}
	if dir := os.Getenv(pruneHelperEnv); dir != "" {
		os.Exit(pruneHelper(dir))
	}
	os.Exit(m.Run())
}

// killWritersEnv sets how many goroutines of the kill -9 helper append at
// once (default 1): with several, their writes share transactions (group
// commit).
const killWritersEnv = "TERMD_RECEIPT_KILL_WRITERS"

func killHelper(dir string) int {
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
	writers, _ := strconv.Atoi(os.Getenv(killWritersEnv))
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, args...)
		out.Flush()
	}
	failed := make(chan struct{})
	for w := range max(writers, 1) {
		go func() {
			for i := 0; ; i++ {
				exec := fmt.Sprintf("exec-%d-%d-%d", os.Getpid(), w, i)
				r := sampleReceipt(k, receipt.StatusSucceeded, "kill")
				r.ExecutionID = exec
				if err := s.AppendIntent(Intent{ExecutionID: exec, PlanID: "p-" + exec, SessionID: "kill", Receipt: r}); err != nil {
					fmt.Fprintln(os.Stderr, err)
					close(failed)
					return
				}
				say("intent %s\n", exec)
				got, err := s.Append(r)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					close(failed)
					return
				}
				// After the seq and id: how many writes the store
				// committed so far, in how many transactions.
				writes, commits := s.WriteStats()
				say("acked %d %s %d %d\n", got.Seq, got.ID, writes, commits)
			}
		}()
	}
	<-failed
	return 2
}

func TestKill9LosesNothingAcked(t *testing.T) {
	dir := t.TempDir()
	acked := map[int64]string{}
	intents := map[string]bool{}
	for round, stopAfter := range []int{25, 40, 7} {
		killRound(t, dir, 1, round, stopAfter, acked, intents)
	}
	if len(acked) < 25+40+7 {
		t.Fatalf("only %d acked", len(acked))
	}
}

// killRound runs the kill -9 helper with writers appending at once, kills
// it once stopAfter receipts were acknowledged (mid-loop: it is already
// working on its next appends), and checks the store it left: every
// acknowledged receipt is there at its seq, the chain verifies, and every
// acknowledged intent has its receipt or is returned for recovery (at most
// one a writer), which turns it into an outcome_unknown receipt. It adds
// what was acknowledged to acked and intents, and returns whether two
// writes were ever acknowledged by one transaction (group commit).
func killRound(t *testing.T, dir string, writers, round, stopAfter int, acked map[int64]string, intents map[string]bool) (shared bool) {
	t.Helper()
	cmd, stdout, stderr := startHelper(t, helperEnv+"="+dir, fmt.Sprintf("%s=%d", killWritersEnv, writers))
	sc := bufio.NewScanner(stdout)
	n := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch f[0] {
		case "intent":
			intents[f[1]] = true
		case "acked":
			seq, _ := strconv.ParseInt(f[1], 10, 64)
			acked[seq] = f[2]
			writes, _ := strconv.ParseInt(f[3], 10, 64)
			commits, _ := strconv.ParseInt(f[4], 10, 64)
			shared = shared || writes > commits
			n++
		}
		if n == stopAfter {
			cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: helper did not die by SIGKILL: %v; stderr: %s", round, err, stderr.String())
	}
	checkAfterKill(t, dir, writers, round, acked, intents)
	return shared
}

// startHelper starts this test binary again with env added (TestMain
// sends it to a helper), its stdout piped and its stderr kept.
func startHelper(t *testing.T, env ...string) (*exec.Cmd, io.ReadCloser, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}

// checkAfterKill opens the store a killed helper left and checks it (see
// killRound), recovering its open intents.
func checkAfterKill(t *testing.T, dir string, writers, round int, acked map[int64]string, intents map[string]bool) {
	t.Helper()
	k, err := LoadOrCreateKeys(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(dir, "receipts.db"), k)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for seq, id := range acked {
		r, err := s.GetSeq(seq)
		if err != nil || r.ID != id {
			t.Fatalf("round %d: acked seq %d (%s) lost: %v", round, seq, id, err)
		}
	}
	checked, bad, err := s.VerifyChain()
	if err != nil || bad != 0 || checked < len(acked) {
		t.Fatalf("round %d: chain after kill -9: checked %d (acked %d), bad %d, %v", round, checked, len(acked), bad, err)
	}
	open, err := s.RecoverIntents()
	if err != nil {
		t.Fatal(err)
	}
	if len(open) > writers {
		t.Fatalf("round %d: %d open intents, at most %d expected", round, len(open), writers)
	}
	isOpen := map[string]bool{}
	for _, in := range open {
		isOpen[in.ExecutionID] = true
	}
	for exec := range intents {
		if _, err := s.ByExecution(exec); err != nil && !isOpen[exec] {
			t.Fatalf("round %d: acked intent %s lost: neither its receipt nor open (%v)", round, exec, err)
		}
	}
	for _, in := range open {
		got, err := s.Append(in.OutcomeUnknown(in.StartedAt, "daemon was killed"))
		if err != nil {
			t.Fatal(err)
		}
		acked[got.Seq] = got.ID
	}
	if open, _ := s.RecoverIntents(); len(open) != 0 {
		t.Fatalf("round %d: intents still open after recovery", round)
	}
}

// Every single-byte change anywhere in a stored body is caught by the
// receipt's own checks, before the chain link is even consulted.
func TestEveryByteFlipIsDetected(t *testing.T) {
	s, k, _ := newStore(t)
	r, err := s.Append(sampleReceipt(k, receipt.StatusFailed, "s"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := receipt.CanonicalBytes(r)
	pubs, hk := k.PublicKeys(), k.HMACKey()
	if _, err := receipt.VerifyStored(body, pubs, hk); err != nil {
		t.Fatal(err)
	}
	for i := range body {
		for _, bit := range []byte{0x01, 0x20} {
			b := append([]byte(nil), body...)
			b[i] ^= bit
			if _, err := receipt.VerifyStored(b, pubs, hk); err == nil {
				t.Fatalf("flipping byte %d (%q -> %q) went unnoticed", i, body[i], b[i])
			}
		}
	}
}

// Append validates the signed receipt against the schema (on the parsed tree
// it writes, not a re-parse) and stores nothing that does not match, and what
// it stores is exactly CanonicalBytes of the returned receipt.
func TestAppendRefusesSchemaInvalid(t *testing.T) {
	s, k, _ := newStore(t)
	bad := sampleReceipt(k, receipt.StatusSucceeded, "s")
	bad.BinarySHA256 = "not-a-hash"
	if _, err := s.Append(bad); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Fatalf("Append of a schema-invalid receipt: %v", err)
	}
	neg := sampleReceipt(k, receipt.StatusFailed, "s")
	neg.DurationMs = -1
	if _, err := s.Append(neg); err == nil {
		t.Fatal("Append accepted a negative duration")
	}
	if n, _ := s.Count(); n != 0 {
		t.Fatalf("%d receipts stored", n)
	}
	for _, st := range receipt.Statuses {
		got, err := s.Append(sampleReceipt(k, st, "s"))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := receipt.CanonicalBytes(got)
		var stored []byte
		if err := s.db.QueryRow(`SELECT body FROM receipts WHERE seq = ?`, got.Seq).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stored, want) {
			t.Fatalf("stored body differs from CanonicalBytes:\n%s\n%s", stored, want)
		}
		if err := receipt.ValidateSchema(stored); err != nil {
			t.Fatal(err)
		}
	}
	if _, bad, err := s.VerifyChain(); err != nil || bad != 0 {
		t.Fatalf("VerifyChain: %d %v", bad, err)
	}
}

// The chain head lives in memory between appends; a transaction that fails
// after the head was advanced (here: a batch whose second receipt repeats an
// id) must not leave a head that the next append would chain to.
func TestChainHeadAfterAFailedAppend(t *testing.T) {
	s, k, path := newStore(t)
	first, err := s.Append(sampleReceipt(k, receipt.StatusSucceeded, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	dup := sampleReceipt(k, receipt.StatusFailed, "s1")
	dup.ID = first.ID
	if err := s.appendBatch([]*receipt.Receipt{sampleReceipt(k, receipt.StatusKilled, "s1"), dup}); err == nil {
		t.Fatal("a duplicate receipt id was appended")
	}
	dup.ID = ""
	if _, err := s.Append(dup); err != nil {
		t.Fatal(err)
	}
	first.Seq++ // dup is seq 2
	next, err := s.Append(sampleReceipt(k, receipt.StatusFailed, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if next.Seq != first.Seq+1 {
		t.Fatalf("after a failed append the next seq is %d, want %d", next.Seq, first.Seq+1)
	}
	s.Close()
	s2, err := Open(path, k)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if checked, bad, err := s2.VerifyChain(); err != nil || bad != 0 || checked != 3 {
		t.Fatalf("chain: checked %d bad %d %v", checked, bad, err)
	}
	third, err := s2.Append(sampleReceipt(k, receipt.StatusCancelled, "s1"))
	if err != nil || third.Seq != 4 {
		t.Fatalf("a reopened store continues the chain: %v %v", third, err)
	}
}
