//go:build linux

package runner

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"hash"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/pool"
)

const gib = 1 << 30

// vmRSS is this process's resident set in bytes (/proc/self/status VmRSS).
func vmRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peakRSSDuring samples VmRSS while f runs and returns the growth over the
// level before f.
func peakRSSDuring(f func()) (growth int64) {
	base := vmRSS()
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if v := vmRSS(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	if v := vmRSS(); v > peak.Load() {
		peak.Store(v)
	}
	return peak.Load() - base
}

func hmacHash() hash.Hash { return hmac.New(sha256.New, []byte("bench-key")) }

func runGiB(t testing.TB, r *Runner) Result {
	var cb atomic.Int64
	p, err := r.Start(Spec{
		Path:     "/usr/bin/head",
		Argv:     []string{"head", "-c", strconv.Itoa(gib), "/dev/zero"},
		Timeout:  5 * time.Minute,
		NewHash:  hmacHash,
		OnOutput: func(_ Stream, _ int64, c []byte) { cb.Add(int64(len(c))) },
	})
	if err != nil {
		t.Fatal(err)
	}
	res := p.Wait()
	if res.Status != StatusSucceeded || res.Stdout.Total != gib || cb.Load() != gib {
		t.Fatalf("1 GiB run: %s total %d callback %d err %v", res.Status, res.Stdout.Total, cb.Load(), res.Err)
	}
	return res
}

// A command printing 1 GiB must not grow the daemon by more than a few MiB.
func TestOutputMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 1 GiB")
	}
	r := newRunner(t, Options{})
	runGiB(t, r) // warm up buffers, goroutine stacks, GC
	var res Result
	growth := peakRSSDuring(func() { res = runGiB(t, r) })
	t.Logf("RSS growth while printing 1 GiB: %.1f MiB (kept %d bytes)", float64(growth)/(1<<20), len(res.Stdout.Kept))
	if limit := int64(8<<20) * memoryBoundSlack; growth > limit {
		t.Fatalf("RSS grew by %d bytes while capturing 1 GiB (limit %d)", growth, limit)
	}
}

// plainPipe reads 1 GiB from head through a plain pipe with the same buffer
// size, no hashing: the baseline for throughput.
func plainPipe(t testing.TB, hashIt bool) {
	cmd := exec.Command("/usr/bin/head", "-c", strconv.Itoa(gib), "/dev/zero")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, readBufSize)
	h := hmacHash()
	var n int64
	for {
		k, err := out.Read(buf)
		n += int64(k)
		if hashIt {
			h.Write(buf[:k])
		}
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil || n != gib {
		t.Fatalf("plain pipe: %v %d", err, n)
	}
}

func timeIt(n int, f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		f()
		if d := time.Since(t0); d < best {
			best = d
		}
	}
	return best
}

// TestBenchmark prints throughput and spawn-overhead ratios against baselines
// measured in the same run. Run with TERMD_BENCH=1 (takes ~30 s).
func TestBenchmark(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1")
	}
	rCg := newRunner(t, Options{})
	rFb := newRunner(t, Options{NoCgroups: true})
	mib := func(d time.Duration) float64 { return float64(gib) / (1 << 20) / d.Seconds() }

	plain := timeIt(3, func() { plainPipe(t, false) })
	plainHash := timeIt(3, func() { plainPipe(t, true) })
	cg := timeIt(3, func() { runGiB(t, rCg) })
	fb := timeIt(3, func() { runGiB(t, rFb) })
	growth := peakRSSDuring(func() { runGiB(t, rCg) })

	const spawns = 200
	spawnPlain := timeIt(3, func() {
		for i := 0; i < spawns; i++ {
			if err := exec.Command("/bin/true").Run(); err != nil {
				t.Fatal(err)
			}
		}
	}) / spawns
	spawnWith := func(r *Runner, netns bool) time.Duration {
		return timeIt(3, func() {
			for i := 0; i < spawns; i++ {
				p, err := r.Start(Spec{Path: "/bin/true", Timeout: 10 * time.Second, NoNetwork: netns})
				if err != nil {
					t.Fatal(err)
				}
				if res := p.Wait(); res.Status != StatusSucceeded {
					t.Fatalf("true: %+v", res)
				}
			}
		}) / spawns
	}
	spCg := spawnWith(rCg, false)
	spFb := spawnWith(rFb, false)
	spNet := spawnWith(rCg, true)

	var b strings.Builder
	fmt.Fprintf(&b, "\n%-44s %12s %8s\n", "output: 1 GiB of stdout (best of 3)", "MiB/s", "ratio")
	fmt.Fprintf(&b, "%-44s %12.0f %8.2f\n", "plain pipe read (baseline)", mib(plain), 1.0)
	fmt.Fprintf(&b, "%-44s %12.0f %8.2f\n", "plain pipe read + HMAC-SHA256", mib(plainHash), plain.Seconds()/plainHash.Seconds())
	fmt.Fprintf(&b, "%-44s %12.0f %8.2f\n", "runner, cgroup (HMAC, cap, callback)", mib(cg), plain.Seconds()/cg.Seconds())
	fmt.Fprintf(&b, "%-44s %12.0f %8.2f\n", "runner, fallback (HMAC, cap, callback)", mib(fb), plain.Seconds()/fb.Seconds())
	fmt.Fprintf(&b, "%-44s %12.1f\n", "peak RSS growth during 1 GiB (MiB)", float64(growth)/(1<<20))
	fmt.Fprintf(&b, "\n%-44s %12s %8s\n", "spawn+wait /bin/true (best of 3 x 200)", "per run", "ratio")
	fmt.Fprintf(&b, "%-44s %12s %8.2f\n", "os/exec (baseline)", spawnPlain.Round(time.Microsecond), 1.0)
	fmt.Fprintf(&b, "%-44s %12s %8.2f\n", "runner, cgroup", spCg.Round(time.Microsecond), spCg.Seconds()/spawnPlain.Seconds())
	fmt.Fprintf(&b, "%-44s %12s %8.2f\n", "runner, fallback", spFb.Round(time.Microsecond), spFb.Seconds()/spawnPlain.Seconds())
	fmt.Fprintf(&b, "%-44s %12s %8.2f\n", "runner, cgroup + netns", spNet.Round(time.Microsecond), spNet.Seconds()/spawnPlain.Seconds())
	t.Log(b.String())
}

// TestBenchSpawnPools prints what the spawn pools save: Runner.Start of
// /bin/true without network and with pids/memory limits (the daemon's usual
// execution), until the command has exec'd, with the pools and without them
// (TERMD_SPAWN_POOL=0), in alternating rounds, next to os/exec's start of
// the same binary. Spawns are 5 ms apart, as an agent's are at least (a
// plan and an intent lie between two), so the pools refill in between.
func TestBenchSpawnPools(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1")
	}
	on := newRunner(t, Options{})
	off := newRunner(t, Options{NoPool: true})
	spec := Spec{Path: "/bin/true", Timeout: 10 * time.Second, NoNetwork: true, PidsMax: 512, MemoryMax: 1 << 30}
	startOnly := func(r *Runner) time.Duration {
		t0 := time.Now()
		p, err := r.Start(spec)
		d := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		if res := p.Wait(); res.Status != StatusSucceeded || !res.NetNSApplied {
			t.Fatalf("true: %+v", res)
		}
		p.Delivered() // as the daemon does once the receipt is committed
		return d
	}
	waitPool(t, on, pool.Size, pool.Size)
	var with, without, plain []time.Duration
	for range 6 {
		for range 40 {
			with = append(with, startOnly(on))
			time.Sleep(5 * time.Millisecond)
		}
		for range 40 {
			without = append(without, startOnly(off))
			time.Sleep(5 * time.Millisecond)
		}
		for range 40 {
			c := exec.Command("/bin/true")
			t0 := time.Now()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			plain = append(plain, time.Since(t0))
			_ = c.Wait()
			time.Sleep(5 * time.Millisecond)
		}
	}
	pct := func(d []time.Duration, q int) time.Duration {
		s := append([]time.Duration(nil), d...)
		slices.Sort(s)
		return s[(len(s)-1)*q/100].Round(time.Microsecond)
	}
	fmt.Printf("BENCH spawn: Runner.Start /bin/true, no network, pids+memory limits: with spawn pools median %v (p90 %v) vs without (TERMD_SPAWN_POOL=0) median %v (p90 %v): ratio %.2fx; os/exec start median %v\n",
		pct(with, 50), pct(with, 90), pct(without, 50), pct(without, 90), float64(pct(with, 50))/float64(pct(without, 50)), pct(plain, 50))
}

// TestBenchCgroupReuse prints what reusing ended executions' cgroups saves
// (pool.Cgroups.Recycle): the process's CPU (threads and reaped children,
// getrusage) per Runner.Start + Wait of /bin/true with pids and memory
// limits and no network, on a runner that reuses them and on one that does
// not (Options.NoCgroupReuse), in alternating rounds of the same run, each
// round ending once its runner's pools are full again (their refill is in
// its CPU). Spawns are 5 ms apart, as an agent's are at least.
func TestBenchCgroupReuse(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("set TERMD_BENCH=1")
	}
	arms := []*Runner{newRunner(t, Options{}), newRunner(t, Options{NoCgroupReuse: true})}
	spec := Spec{Path: "/bin/true", Timeout: 10 * time.Second, NoNetwork: true, PidsMax: 512, MemoryMax: 1 << 30}
	cpu := func() time.Duration {
		var self, kids unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &self)
		_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &kids)
		return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
	}
	const rounds, per = 12, 40
	var ratios []float64
	var total [2]time.Duration
	for round := range rounds + 1 {
		var got [2]time.Duration
		for k := range arms {
			i := (round + k) % 2 // the first arm rotates
			r := arms[i]
			waitPool(t, r, pool.Size, pool.Size)
			c0 := cpu()
			for range per {
				p, err := r.Start(spec)
				if err != nil {
					t.Fatal(err)
				}
				if res := p.Wait(); res.Status != StatusSucceeded {
					t.Fatalf("true: %+v", res)
				}
				p.Delivered()
				time.Sleep(5 * time.Millisecond)
			}
			waitPool(t, r, pool.Size, pool.Size)
			r.cleanup.Wait()
			got[i] = cpu() - c0
		}
		if round == 0 {
			continue // warm-up
		}
		total[0] += got[0]
		total[1] += got[1]
		ratios = append(ratios, float64(got[0])/float64(got[1]))
	}
	slices.Sort(ratios)
	n := time.Duration(rounds * per)
	fmt.Printf("BENCH cgroup reuse: CPU per spawn of /bin/true (pids+memory limits, no network; process + children, pool refill included): reuse %v vs no reuse (TERMD_CGROUP_REUSE=0) %v: ratio %.3f; per-round ratios median %.3f, min %.3f, max %.3f (%d rounds of %d); %s; %s\n",
		(total[0] / n).Round(time.Microsecond), (total[1] / n).Round(time.Microsecond), float64(total[0])/float64(total[1]),
		ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], rounds, per, arms[0].PoolStatus(), arms[1].PoolStatus())
}
