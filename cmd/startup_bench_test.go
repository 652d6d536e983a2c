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

// TestBenchStartup measures `termctl version` against a real daemon and a
// trivial Go binary that prints one line, alternating, in the same run, and
// prints the ratio of the medians (target: within 2x), in wall time and in
// CPU time (user+system, steadier on a busy machine). It also measures
// internal/benchfloor, the least a cobra + gRPC client of termd does for the
// same answer, to show how much of the ratio is termctl's own. Run with
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
	floor := filepath.Join(dir, "benchfloor")
	build := exec.Command("go", "build", "-tags", harness.BuildTags, "-o", floor, "./internal/benchfloor")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the cobra + gRPC floor: %v\n%s", err, out)
	}
	termctl := harness.Bin(t, "termctl")
	env := append(os.Environ(), "TERMD_SOCKET="+d.Socket, "NO_COLOR=1")
	type sample struct{ wall, cpu time.Duration }
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
	wall := func(s []sample) time.Duration {
		ds := make([]time.Duration, len(s))
		for i, x := range s {
			ds[i] = x.wall
		}
		return median(ds)
	}
	cpu := func(s []sample) time.Duration {
		ds := make([]time.Duration, len(s))
		for i, x := range s {
			ds[i] = x.cpu
		}
		return median(ds)
	}
	report := func(what string, s []sample) {
		line := fmt.Sprintf("%-28s median %6.2f ms vs trivial Go binary %5.2f ms: ratio %.2f (target <= 2); CPU %5.2f vs %5.2f ms: ratio %.2f; vs cobra+gRPC floor: wall %.2f, CPU %.2f",
			what, ms(wall(s)), ms(wall(base)), float64(wall(s))/float64(wall(base)), ms(cpu(s)), ms(cpu(base)), float64(cpu(s))/float64(cpu(base)),
			float64(wall(s))/float64(wall(flo)), float64(cpu(s))/float64(cpu(flo)))
		fmt.Println("BENCH startup: " + line)
	}
	report("termctl version (daemon)", ver)
	report("termctl --help (no daemon)", help)
	report("cobra+gRPC floor (daemon)", flo)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
