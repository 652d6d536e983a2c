package otlpexport

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/internal/harness"
	"github.com/termd/termd/receipt"
)

// benchReceipt is a schema-valid receipt of a small command's run.
func benchReceipt(k *receiptstore.Keys, i int) *receipt.Receipt {
	start := time.Now().UTC()
	zero := 0
	out := fmt.Sprintf("line %d of a small command's output\n", i)
	return &receipt.Receipt{
		PlanID: fmt.Sprintf("plan-%d", i), SessionID: "bench-session", ExecutionID: fmt.Sprintf("exec-%d", i),
		RequestHash:   "4b227777d4dd1fc61c6f884f48641d02b4d121d3fd328cb08b5531fcacdabf8a",
		Requester:     receipt.Principal{Kind: "unix", ID: "uid:1000", Role: "agent"},
		Command:       "git status --short",
		CommandSHA256: k.Digest([]byte("git status --short")),
		BinaryPath:    "/usr/bin/git", BinarySHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Cwd: "/home/dev/project", Mode: "confirm", Risk: "low", Decision: string(receipt.DecisionAllow),
		Policy: receipt.Policy{Allowed: true, Risk: "low", Reasons: []string{"read-only git subcommand"},
			Argv: []string{"git", "status", "--short"}, Version: "builtin-1", RuleIDs: []string{"git.read"}},
		Limits:    receipt.Limits{TimeoutMs: 30000, MaxOutputBytes: 1 << 20},
		Status:    receipt.StatusSucceeded,
		StartedAt: start, FinishedAt: start.Add(5 * time.Millisecond), DurationMs: 5, ExitCode: &zero,
		Stdout: out, StdoutBytes: int64(len(out)), StdoutDigest: k.Digest([]byte(out)), StderrDigest: k.Digest(nil),
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchOTLPExport (make bench) measures what exporting costs per receipt
// against the durable append of that receipt, both in this run: receipts are
// appended to a real store, then exported to the real test collector over
// gRPC and over HTTP; it prints the throughput of one collector link and the
// exporter's CPU per receipt.
func TestBenchOTLPExport(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	const n = 3000
	col := harness.StartCollector(t)
	dir := t.TempDir()
	keys, err := receiptstore.LoadOrCreateKeys(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := receiptstore.Open(filepath.Join(dir, "receipts.db"), keys)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	appends := make([]time.Duration, n)
	for i := range appends {
		r := benchReceipt(keys, i)
		start := time.Now()
		if _, err := store.Append(r); err != nil {
			t.Fatal(err)
		}
		appends[i] = time.Since(start)
	}
	appendMed := harness.Pct(appends, 50)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, link := range []struct{ proto, url string }{{config.OTLPGRPC, "http://" + col.GRPCAddr}, {config.OTLPHTTP, "http://" + col.HTTPAddr}} {
		set, err := Resolve(config.OTLP{Endpoint: link.url, Protocol: link.proto, HostName: "bench", Batch: 256,
			Timeout: config.Duration(10 * time.Second), MaxBackoff: config.Duration(time.Second)}, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		cdir := t.TempDir()
		x, err := New(set, cdir, store, log)
		if err != nil {
			t.Fatal(err)
		}
		cpu0, start := cpuNow(), time.Now()
		x.Start()
		for x.Status().ExportedSeq < n {
			time.Sleep(5 * time.Millisecond)
		}
		wall, cpu := time.Since(start), cpuNow()-cpu0
		x.Close()
		if f := x.Failures(); f != 0 {
			t.Fatalf("%s: %d failed exports: %s", link.proto, f, x.Status().LastError)
		}
		per, cpuPer := wall/n, cpu/n
		harness.Bench(t, fmt.Sprintf("OTLP export over %s to one collector: %d receipts in %v: %.0f receipts/s, %v per receipt; exporter CPU %v per receipt (collector excluded) vs a durable receipt append median %v: ratio %.2fx",
			link.proto, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), per.Round(time.Microsecond), cpuPer.Round(time.Microsecond), appendMed.Round(time.Microsecond), float64(cpuPer)/float64(appendMed)))
	}
}
