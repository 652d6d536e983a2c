//go:build linux

package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBenchV1Join prints what a process's way into its v1 cgroups costs the
// daemon (hybrid hosts): the spawning thread entering them, forking, leaving
// them and lowering the pids limit it raised (an inline spawn before), against
// the fork from outside them and one JoinV1 of the child (a pre-started
// launcher, and an inline launcher now). CPU of the calling thread
// (RUSAGE_THREAD), the fork of /bin/sleep included on both sides, in
// alternating rounds.
func TestBenchV1Join(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1")
	}
	tr := newTree(t)
	if len(tr.V1Parents) == 0 {
		t.Skip("no v1 hierarchies here (not a hybrid host)")
	}
	lim := Limits{Pids: 64, Memory: 256 << 20}
	threadCPU := func() time.Duration {
		var ru unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	one := func(i int, joined bool) time.Duration {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cg, err := tr.Make(fmt.Sprintf("join-%d", i), joined)
		if err != nil {
			t.Fatal(err)
		}
		defer cg.Remove()
		if err := tr.ApplyLimits(cg, lim); err != nil {
			t.Fatal(err)
		}
		c := exec.Command("/bin/sleep", "5")
		c0 := threadCPU()
		if joined {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if err := cg.JoinV1(c.Process.Pid); err != nil {
				t.Fatal(err)
			}
		} else {
			leave, err := tr.EnterV1(cg)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if err := leave(); err != nil {
				t.Fatal(err)
			}
			cg.Settle()
		}
		d := threadCPU() - c0
		_ = c.Process.Kill()
		_ = c.Wait()
		return d
	}
	var enter, join []time.Duration
	for i := range 400 {
		if i%2 == 0 {
			enter = append(enter, one(i, false))
		} else {
			join = append(join, one(i, true))
		}
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	sum := func(d []time.Duration) (s time.Duration) {
		for _, x := range d {
			s += x
		}
		return s
	}
	fmt.Printf("BENCH v1 join: thread CPU of fork + way into v1 pids+memory cgroups: enter/fork/leave/settle mean %v median %v; fork + JoinV1 mean %v median %v; ratio of means %.3f (%d each, alternating)\n",
		sum(enter)/time.Duration(len(enter)), med(enter), sum(join)/time.Duration(len(join)), med(join), float64(sum(join))/float64(sum(enter)), len(enter))
}
