package cmd_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// TestBenchStartup measures `termctl version` against a real daemon and
// against bench/clifloor, the least a cobra + gRPC client of termd does for
// the same answer (a cobra root, a connection over the unix socket, one
// GetVersion call), built with the same tags in the same run. Target:
// termctl within 1.15x of that floor. The whole processes run in turn (a
// trivial Go binary that prints one line, the floor, termctl version,
// termctl --help), and each figure is given as the ratio of the medians and
// as the median of the ratios pair by pair (steadier when the machine's
// speed drifts), in wall time and in CPU time (user+system). Run with
// `make bench`.
func TestBenchStartup(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	d := harness.Start(t, harness.Options{})
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"trivial dev\\n\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	trivial := filepath.Join(dir, "trivial")
	if out, err := exec.Command("go", "build", "-o", trivial, src).CombinedOutput(); err != nil {
		t.Fatalf("building the baseline: %v\n%s", err, out)
	}
	floor := filepath.Join(dir, "clifloor")
	build := exec.Command("go", "build", "-tags", harness.BuildTags, "-o", floor, "./bench/clifloor")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the cobra + gRPC floor: %v\n%s", err, out)
	}
	termctl := harness.Bin(t, "termctl")
	env := append(os.Environ(), "TERMD_SOCKET="+d.Socket, "NO_COLOR=1")
	run := func(bin string, args ...string) sample {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
		}
		return sample{time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	}
	const n = 100
	var base, flo, ver, help []sample
	for i := 0; i < n+5; i++ {
		b, f, v, h := run(trivial), run(floor), run(termctl, "version"), run(termctl, "--help")
		if i >= 5 { // warm-up: page cache, daemon connection paths
			base, flo, ver, help = append(base, b), append(flo, f), append(ver, v), append(help, h)
		}
	}
	fmt.Printf("BENCH startup: termctl version vs cobra+gRPC floor (bench/clifloor), %d runs each, alternating (target <= 1.15):\n", n)
	fmt.Println("BENCH startup:   " + compare(ver, flo))
	fmt.Println("BENCH startup: against a trivial Go binary that prints one line:")
	fmt.Println("BENCH startup:   termctl version:            " + compare(ver, base))
	fmt.Println("BENCH startup:   termctl --help (no call):   " + compare(help, base))
	fmt.Println("BENCH startup:   cobra+gRPC floor:           " + compare(flo, base))
}

// sample is one whole-process run.
type sample struct{ wall, cpu time.Duration }

// compare says how a's runs compare with b's, taken in turn (a[i] beside b[i]).
func compare(a, b []sample) string {
	wall := func(s sample) time.Duration { return s.wall }
	cpu := func(s sample) time.Duration { return s.cpu }
	return fmt.Sprintf("wall %6.2f vs %6.2f ms: ratio %.2f (pairwise %.2f); CPU %6.2f vs %6.2f ms: ratio %.2f (pairwise %.2f)",
		ms(median(a, wall)), ms(median(b, wall)), float64(median(a, wall))/float64(median(b, wall)), pairwise(a, b, wall),
		ms(median(a, cpu)), ms(median(b, cpu)), float64(median(a, cpu))/float64(median(b, cpu)), pairwise(a, b, cpu))
}

func median(s []sample, f func(sample) time.Duration) time.Duration {
	ds := make([]time.Duration, len(s))
	for i, x := range s {
		ds[i] = f(x)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// pairwise is the median of a[i]/b[i].
func pairwise(a, b []sample, f func(sample) time.Duration) float64 {
	rs := make([]float64, 0, len(a))
	for i := range a {
		if d := f(b[i]); d > 0 {
			rs = append(rs, float64(f(a[i]))/float64(d))
		}
	}
	if len(rs) == 0 {
		return 0
	}
	sort.Float64s(rs)
	return rs[len(rs)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
