//go:build linux

package pool

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBenchNetnsCheck prints the CPU of one check of a recycled namespace
// (pristineNetNS on a thread inside it) against main's version of it before
// the files were read without os.ReadFile (pristineNetNSOS, below): thread CPU
// (RUSAGE_THREAD) of blocks of checks, the two alternating in one run.
func TestBenchNetnsCheck(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs network namespaces and root")
	}
	np := newNetNS(t)
	var out string
	done := make(chan struct{})
	go func() { // the thread ends in the namespace: never unlocked
		defer close(done)
		runtime.LockOSThread()
		fd, err := np.make()
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
		}
		if err != nil {
			out = err.Error()
			return
		}
		var buf [4096]byte
		const rounds, block = 40, 250
		var old, cur time.Duration
		for i := range 2 * rounds {
			c0 := threadCPU()
			for range block {
				if i%2 == 0 {
					err = pristineNetNSOS()
				} else {
					err = pristineNetNS(&buf)
				}
				if err != nil {
					out = err.Error()
					return
				}
			}
			if i%2 == 0 {
				old += threadCPU() - c0
			} else {
				cur += threadCPU() - c0
			}
		}
		n := time.Duration(rounds * block)
		out = fmt.Sprintf("BENCH netns check: thread CPU per check: os.ReadFile (main) %v, raw reads %v, ratio %.3f (%d each, alternating blocks of %d)", old/n, cur/n, float64(cur)/float64(old), rounds*block, block)
	}()
	<-done
	fmt.Println(out)
	if !strings.HasPrefix(out, "BENCH") {
		t.Fatal(out)
	}
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pristineNetNSOS is main's pristineNetNS at the time of the change, the A
// side of TestBenchNetnsCheck.
func pristineNetNSOS() error {
	st, err := os.ReadFile("/proc/thread-self/net/sockstat")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(st), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "sockets:" && f[2] != "0":
			return fmt.Errorf("%s sockets in use", f[2])
		case len(f) >= 7 && f[0] == "TCP:" && f[5] == "tw" && f[6] != "0":
			return fmt.Errorf("TCP sockets left in TIME_WAIT: %s", f[6])
		}
	}
	dev, err := os.ReadFile("/proc/thread-self/net/dev")
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(dev)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.TrimSpace(lines[2]), "lo:") {
		return fmt.Errorf("devices other than the loopback: %q", lines[2:])
	}
	return loopbackDown() // unchanged
}
