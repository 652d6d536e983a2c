package receiptstore

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/receipt"
)

// BenchmarkAppendExecution: what one execution costs the store, an intent
// and the receipt that closes it (each its own commit and fsync), with the
// process CPU per execution (cpu-ns/op) beside the wall time.
func BenchmarkAppendExecution(b *testing.B) {
	dir := b.TempDir()
	keys, err := LoadOrCreateKeys(filepath.Join(dir, "keys"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(filepath.Join(dir, "receipts.db"), keys)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	exit := 0
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("exec-%d", i)
		if err := s.AppendIntent(Intent{ExecutionID: id, PlanID: "plan-" + id, SessionID: "s", StartedAt: start}); err != nil {
			b.Fatal(err)
		}
		r := &receipt.Receipt{
			SchemaVersion: receipt.SchemaVersion, ExecutionID: id, PlanID: "plan-" + id, SessionID: "s",
			RequestHash: "4b227777d4dd1fc61c6f884f48641d02b4d121d3fd328cb08b5531fcacdabf8a",
			Requester:   receipt.Principal{Kind: "unix", ID: "uid:0", Role: "operator"},
			Command:     "pwd", CommandSHA256: keys.Digest([]byte("pwd")),
			BinaryPath: "/usr/bin/pwd", BinarySHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			Cwd: "/w", Mode: "confirm", Risk: "low", Decision: "allow",
			Policy:    receipt.Policy{Allowed: true, Risk: "low", Reasons: []string{"prints the working directory"}, Argv: []string{"pwd"}, Version: "v1"},
			Limits:    receipt.Limits{TimeoutMs: 1000, MaxOutputBytes: 1 << 20},
			Status:    receipt.StatusSucceeded,
			StartedAt: start, FinishedAt: start, ExitCode: &exit,
			Stdout: "/w\n", StdoutBytes: 3, StdoutDigest: keys.Digest([]byte("/w\n")), StderrDigest: keys.Digest(nil),
		}
		if _, err := s.Append(r); err != nil {
			b.Fatal(err)
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime) + syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime))
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(i), "cpu-ns/op")
}
