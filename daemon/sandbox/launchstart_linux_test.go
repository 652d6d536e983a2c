package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLauncherStartsWithoutTheCLibrary: termd-launch confines the command
// from its entry point, before the static C library starts (CPUID, thread
// storage, IFUNC relocations: about 30 page faults and 1 ms of CPU per
// execution here). A pooled launcher that termd lets go (end of file on its
// configuration socket) exits 125 having touched few pages.
func TestLauncherStartsWithoutTheCLibrary(t *testing.T) {
	launcherPath, _ := bins(t)
	const runs = 5
	best := int64(1 << 30)
	for range runs {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		ctl, sock := os.NewFile(uintptr(pair[0]), "ctl"), os.NewFile(uintptr(pair[1]), "sock")
		repR, repW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := &exec.Cmd{Path: launcherPath, Args: []string{"termd-launch", "pooled"}, Env: []string{}, ExtraFiles: []*os.File{sock, repW}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sock.Close()
		repW.Close()
		ctl.Close() // let it go
		report := make([]byte, 512)
		n, _ := repR.Read(report)
		repR.Close()
		err = cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 125 || n > 0 {
			t.Fatalf("a launcher let go: exit %d (%v), report %q; want 125 and no report", code, err, report[:n])
		}
		if f := cmd.ProcessState.SysUsage().(*syscall.Rusage).Minflt; f < best {
			best = f
		}
	}
	// Measured: 12 from its entry point (8 of them the pages tl_prefault
	// touches while it waits), 32-37 after the C library's start.
	if best > 20 {
		t.Errorf("a pooled launcher let go took %d page faults (the least of %d runs); want at most 20: does something start the C library before launch.c runs?", best, runs)
	}
	t.Logf("page faults of a launcher let go: %d (the least of %d runs)", best, runs)
}

// TestLauncherCallsNoCLibrary: launch.c, compiled as cgo compiles it, refers
// to no symbol outside itself but the C library's entry point, to which it
// hands a start that is not termd's: a call into the C library (or a
// memset or memcpy the compiler put in) would run before the library's
// start, with no thread storage and no IFUNC relocations applied.
func TestLauncherCallsNoCLibrary(t *testing.T) {
	cc, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatal(err)
	}
	nm, err := exec.LookPath("nm")
	if err != nil {
		t.Skip("nm not found")
	}
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "cmd", "termd-launch", "launch.c")
	for _, opt := range []string{"-O0", "-O2"} { // go build's, and a debugging build's
		obj := filepath.Join(t.TempDir(), "launch.o")
		args := append(strings.Fields(string(cc)), opt, "-g", "-fno-stack-protector", "-c", "-o", obj, src)
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		out, err := exec.Command(nm, "-u", obj).Output()
		if err != nil {
			t.Fatal(err)
		}
		var undefined []string
		for _, f := range strings.Fields(string(out)) {
			if f != "U" && f != "_start" {
				undefined = append(undefined, f)
			}
		}
		if len(undefined) > 0 {
			t.Errorf("launch.c at %s calls outside itself: %v (freestanding.h must give it these)", opt, undefined)
		}
	}
}
