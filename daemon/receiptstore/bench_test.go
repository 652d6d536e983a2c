package receiptstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/termd/termd/receipt"
)

// TestBenchReceipts prints durable receipt throughput and full-chain verify
// time as ratios to a plain JSONL append+fsync baseline measured in the same
// run. Run with TERMD_BENCH=1 (TERMD_BENCH_CHAIN overrides the 100000-receipt
// chain length). It asserts nothing about time.
func TestBenchReceipts(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1 to run the receipt benchmarks")
	}
	chainLen := 100000
	if v := os.Getenv("TERMD_BENCH_CHAIN"); v != "" {
		chainLen, _ = strconv.Atoi(v)
	}
	const durableN = 1000
	s, k, _ := newStore(t)
	sample, err := s.Append(sampleReceipt(k, receipt.StatusSucceeded, "bench"))
	if err != nil {
		t.Fatal(err)
	}
	line, _ := receipt.CanonicalBytes(sample)
	line = append(line, '\n')

	// Baseline: append the same bytes to a JSONL file, fsync each.
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "baseline.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < durableN; i++ {
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	baseline := time.Since(start) / durableN
	f.Close()

	// Durable receipts: Store.Append (chain head, sign, JCS, schema, fsync).
	drafts := make([]*receipt.Receipt, durableN)
	for i := range drafts {
		drafts[i] = sampleReceipt(k, receipt.Statuses[i%len(receipt.Statuses)], "bench")
	}
	start = time.Now()
	for _, d := range drafts {
		if _, err := s.Append(d); err != nil {
			t.Fatal(err)
		}
	}
	perReceipt := time.Since(start) / durableN

	// Build a chain of chainLen receipts in batches (not what the daemon
	// does; only to get a long chain quickly), then verify it.
	s2, k2, _ := newStore(t)
	buildStart := time.Now()
	const batch = 5000
	for done := 0; done < chainLen; done += batch {
		n := min(batch, chainLen-done)
		rs := make([]*receipt.Receipt, n)
		for i := range rs {
			rs[i] = sampleReceipt(k2, receipt.Statuses[(done+i)%len(receipt.Statuses)], "chain")
		}
		if err := s2.appendBatch(rs); err != nil {
			t.Fatal(err)
		}
	}
	build := time.Since(buildStart)
	start = time.Now()
	checked, bad, err := s2.VerifyChain()
	verify := time.Since(start)
	if err != nil || bad != 0 || checked != chainLen {
		t.Fatalf("VerifyChain: %d %d %v", checked, bad, err)
	}

	// A second, informative baseline: re-hash an unsigned JSONL chain of the
	// same size (read + sha256 link check), no signatures.
	var jsonl bytes.Buffer
	if err := s2.ExportJSONL(&jsonl, Filter{Limit: -1}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	prev := ""
	for _, l := range bytes.Split(bytes.TrimSpace(jsonl.Bytes()), []byte("\n")) {
		sum := sha256.Sum256(l)
		prev = hex.EncodeToString(sum[:])
	}
	_ = prev
	rehash := time.Since(start)

	baselineChain := baseline * time.Duration(chainLen)
	fmt.Printf("\nreceipt benchmarks (GOMAXPROCS shared; ratios are what matter)\n")
	fmt.Printf("%-46s %14s %12s\n", "measure", "value", "ratio")
	fmt.Printf("%-46s %11.1f µs %12s\n", "baseline: JSONL append+fsync per record", us(baseline), "1.00x")
	fmt.Printf("%-46s %11.1f µs %11.2fx\n", "durable Store.Append per receipt", us(perReceipt), float64(perReceipt)/float64(baseline))
	fmt.Printf("%-46s %11.0f /s %11.2fx\n", "durable receipts per second", float64(time.Second)/float64(perReceipt), float64(baseline)/float64(perReceipt))
	fmt.Printf("%-46s %11.0f /s %12s\n", "baseline JSONL records per second", float64(time.Second)/float64(baseline), "1.00x")
	fmt.Printf("%-46s %12.2f s %12s\n", fmt.Sprintf("build %d-receipt chain (batched)", chainLen), build.Seconds(), "")
	fmt.Printf("%-46s %12.2f s %11.3fx\n", fmt.Sprintf("VerifyChain over %d receipts", chainLen), verify.Seconds(), float64(verify)/float64(baselineChain))
	fmt.Printf("%-46s %12.2f s %12s\n", fmt.Sprintf("  = baseline x %d appends (extrapolated)", chainLen), baselineChain.Seconds(), "1.00x")
	fmt.Printf("%-46s %11.1f µs %11.2fx\n", "VerifyChain per receipt vs baseline append", us(verify/time.Duration(chainLen)), float64(verify/time.Duration(chainLen))/float64(baseline))
	fmt.Printf("%-46s %12.3f s %11.1fx\n", "unsigned JSONL re-hash of the same chain", rehash.Seconds(), float64(verify)/float64(max(rehash, 1)))
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
