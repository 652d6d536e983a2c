package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Floor measures, n times, what one durable execution cannot avoid on this
// machine: a fork/exec of /bin/true plus two fdatasyncs of a 4 KiB append to
// a file in dir (the intent and the receipt). Benchmarks report their figures
// as ratios against it, measured in the same run.
func Floor(t testing.TB, dir string, n int) []time.Duration {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "bench-floor.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	durable := func() {
		if _, err := f.Write(block); err != nil {
			t.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Fatal(err)
		}
		durable()
		durable()
		out[i] = time.Since(start)
	}
	return out
}

// Pct is the nearest-rank percentile p (0..100) of ds.
func Pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// BenchLine prints (and logs) one figure against its baseline: p50 and p90
// of both, the ratio of the medians and the target.
func BenchLine(t testing.TB, what string, got []time.Duration, base string, baseline []time.Duration, target float64) {
	t.Helper()
	g, b := Pct(got, 50), Pct(baseline, 50)
	line := fmt.Sprintf("%s: median %v (p90 %v) vs %s median %v (p90 %v): ratio %.2fx",
		what, g.Round(10*time.Microsecond), Pct(got, 90).Round(10*time.Microsecond), base, b.Round(10*time.Microsecond), Pct(baseline, 90).Round(10*time.Microsecond), float64(g)/float64(b))
	if target > 0 {
		line += fmt.Sprintf(" (target <= %.1fx)", target)
	}
	Bench(t, line)
}

// Bench prints one benchmark line so that `make bench` shows it.
func Bench(t testing.TB, line string) {
	t.Helper()
	fmt.Println("BENCH " + line)
}

// CPUTime is the user+system CPU time process pid has used so far.
func CPUTime(pid int) time.Duration { return statTicks(pid, 11, 12) }

// ChildrenCPU is the user+system CPU time of the children process pid has
// reaped so far (theirs and their reaped children's).
func ChildrenCPU(pid int) time.Duration { return statTicks(pid, 13, 14) }

// statTicks sums fields of /proc/PID/stat counted after the command (state
// is 0; utime 11, stime 12, cutime 13, cstime 14), in clock ticks.
func statTicks(pid int, fields ...int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var sum int64
	for _, i := range fields {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		sum += n
	}
	return time.Duration(sum) * time.Second / 100 // USER_HZ is 100 on Linux
}

// StatusKB reads a kB field (VmRSS, VmHWM) of /proc/PID/status.
func StatusKB(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, field+":") {
			if f := strings.Fields(l); len(f) > 1 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}

// ThreadsCPU is the CPU time of a process's threads, to the nanosecond (the
// sum of /proc/PID/task/*/schedstat; Go's threads live as long as the
// process). CPUTime counts 10 ms ticks, a tenth of a round of 42 pairs
// in mcpbridge's bench (~100 ms of the bridge's CPU): the same binary against itself
// (A/A) differed by 0.54-1.45x per round over 16 rounds with it, 0.80-1.21x
// over 12 with this. Without schedstat it is CPUTime.
func ThreadsCPU(pid int) time.Duration {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return CPUTime(pid)
	}
	var sum time.Duration
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		var ns int64
		if _, err := fmt.Sscan(string(data), &ns); err != nil {
			return CPUTime(pid)
		}
		sum += time.Duration(ns)
	}
	return sum
}
