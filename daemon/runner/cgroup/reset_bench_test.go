//go:build linux

package cgroup

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBenchCgroupReset prints the CPU of one Reset of a pooled cgroup with
// pids and memory limits (in v1 groups) against main's version of it before its counters
// were read through kept descriptors (resetOS, below): thread CPU
// (CLOCK_THREAD_CPUTIME_ID) of the Reset alone, the two alternating in one
// run, each after the reads of an execution's end (Populated) that use up
// the v1 member lists Reset opens.
func TestBenchCgroupReset(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1")
	}
	cg := limitedV1Cgroup(t, "bench-reset")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	now := func() time.Duration {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		return time.Duration(ts.Nano())
	}
	const n = 4000
	var old, cur time.Duration
	for i := range 2 * n {
		if cg.Populated() {
			t.Fatal("populated")
		}
		c0 := now()
		var ok bool
		if i%2 == 0 {
			ok = resetOS(cg)
		} else {
			ok = cg.Reset()
		}
		d := now() - c0
		if !ok {
			t.Fatalf("round %d: not reset", i)
		}
		if i%2 == 0 {
			old += d
		} else {
			cur += d
		}
	}
	fmt.Printf("BENCH cgroup reset (v2 + %d v1 groups): thread CPU per Reset: main %v, now %v, ratio %.3f (%d each, alternating)\n",
		len(cg.v1), old/n, cur/n, float64(cur)/float64(old), n)
}

// resetOS is main's Cgroup.Reset at the time of the change (its reads by
// os.ReadFile), the A side of TestBenchCgroupReset; for v1 limits only (a
// hybrid host, whose v2 has no controller), as the bench uses it.
func resetOS(cg *Cgroup) bool {
	if cg.v2 == "" || cg.stuck || cg.killed {
		return false
	}
	events, err := cg.readFile(filepath.Join(cg.v2, "cgroup.events"))
	if err != nil || !bytes.Contains(events, []byte("populated 0")) || cg.freeze && !bytes.Contains(events, []byte("frozen 0")) {
		return false
	}
	readOS := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return "error"
		}
		return strings.TrimSpace(string(b))
	}
	for _, d := range cg.v1 {
		if len(strings.Fields(readOS(filepath.Join(d, "cgroup.procs")))) > 0 {
			return false
		}
	}
	if d := cg.v1["pids"]; d != "" && readOS(filepath.Join(d, "pids.current")) != "0" {
		return false
	}
	if d := cg.v1["memory"]; d != "" {
		if v, err := strconv.ParseInt(readOS(filepath.Join(d, "memory.usage_in_bytes")), 10, 64); err != nil || v > MaxLeftoverMemory {
			return false
		}
	}
	cg.joined, cg.inV1, cg.applied, cg.pidsMax = false, nil, nil, 0
	for _, d := range cg.v1 {
		cg.keepOpen(filepath.Join(d, "cgroup.procs"), true)
	}
	return true
}
