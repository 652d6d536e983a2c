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
// prints the ratio of the medians (target: within 2x). Run with `make bench`.
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
	termctl := harness.Bin(t, "termctl")
	env := append(os.Environ(), "TERMD_SOCKET="+d.Socket, "NO_COLOR=1")
	run := func(bin string, args ...string) time.Duration {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
		}
		return time.Since(start)
	}
	const n = 100
	var base, ver, help []time.Duration
	for i := 0; i < n+5; i++ {
		b, v, h := run(trivial), run(termctl, "version"), run(termctl, "--help")
		if i >= 5 { // warm-up: page cache, daemon connection paths
			base, ver, help = append(base, b), append(ver, v), append(help, h)
		}
	}
	mb, mv, mh := median(base), median(ver), median(help)
	report := func(what string, d time.Duration) {
		line := fmt.Sprintf("%-28s median %6.2f ms vs trivial Go binary %5.2f ms: ratio %.2f (target <= 2)", what, ms(d), ms(mb), float64(d)/float64(mb))
		fmt.Println("BENCH startup: " + line)
	}
	report("termctl version (daemon)", mv)
	report("termctl --help (no daemon)", mh)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
