package sandbox_test

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// kvs is the launcher's wire form (launcher.Config.Encode) written by hand,
// so a test can send what Encode never would.
func kvs(pairs ...string) []byte {
	var b []byte
	for _, p := range pairs {
		b = append(b, p...)
		b = append(b, 0)
	}
	return b
}

// rawLaunch starts termd-launch the way the runner does (configuration
// socket on descriptor 3, report pipe on 4), from /bin/sh after prelude
// ran in dir, sends it cfg and the go-ahead, and returns what it reported
// and what the command printed.
func rawLaunch(t *testing.T, dir, prelude string, cfg []byte) (report, out string) {
	t.Helper()
	launcherPath, _ := bins(t)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctl := os.NewFile(uintptr(pair[0]), "ctl")
	sock := os.NewFile(uintptr(pair[1]), "sock")
	defer ctl.Close()
	repR, repW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer repR.Close()
	// exec by name: the launcher acts only when argv[0] is "termd-launch".
	cmd := exec.Command("/bin/sh", "-c", prelude+"\nexec termd-launch")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + filepath.Dir(launcherPath) + ":/usr/bin:/bin"}
	cmd.ExtraFiles = []*os.File{sock, repW}
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sock.Close()
	repW.Close()
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(cfg)))
	// A launcher that refuses the configuration closes the socket: the
	// writes may then fail, which the report explains.
	_, _ = ctl.Write(append(hdr[:], cfg...))
	_, _ = ctl.Write([]byte{'g'})
	rep, _ := io.ReadAll(repR)
	_ = cmd.Wait()
	return string(rep), stdout.String()
}

// refused checks that a launch printed nothing from the command and
// reported a refusal containing want.
func refused(t *testing.T, what, report, out, want string) {
	t.Helper()
	if strings.Contains(out, "ran") || !strings.Contains(report, want) {
		t.Errorf("%s: the launcher reported %q and the command printed %q; want a refusal containing %q and no run", what, report, out, want)
	}
}

// Credentials come whole and valid: a uid without a gid would run the
// command with gid 0, and -1 / 4294967295 is "unchanged" to setresuid, so
// the command would keep root.
func TestLauncherRefusesIncompleteOrInvalidCredentials(t *testing.T) {
	host(t)
	if os.Geteuid() != 0 {
		t.Skip("switching credentials needs root")
	}
	cmd := []string{"path", "/bin/sh", "arg", "sh", "arg", "-c", "arg", "echo ran $(id -u) $(id -g)"}
	for _, tc := range []struct {
		name  string
		creds []string
		want  string
	}{
		{"uid without gid", []string{"uid", "65534"}, "both uid and gid are needed"},
		{"gid without uid", []string{"gid", "65534"}, "both uid and gid are needed"},
		{"groups without uid", []string{"group", "65534"}, "both uid and gid are needed"},
		{"uid 4294967295", []string{"uid", "4294967295", "gid", "65534"}, "uid=4294967295 is not a valid id"},
		{"gid 4294967295", []string{"uid", "65534", "gid", "4294967295"}, "gid=4294967295 is not a valid id"},
		{"uid -1", []string{"uid", "-1", "gid", "-1"}, "uid=-1 is not a valid id"},
		{"group 4294967295", []string{"uid", "65534", "gid", "65534", "group", "4294967295"}, "group=4294967295 is not a valid id"},
	} {
		report, out := rawLaunch(t, t.TempDir(), "", kvs(append(tc.creds, cmd...)...))
		refused(t, tc.name, report, out, tc.want)
	}
	// Both, valid: the command runs as them.
	report, out := rawLaunch(t, t.TempDir(), "", kvs(append([]string{"uid", "65534", "gid", "65533"}, cmd...)...))
	if report != "" || strings.TrimSpace(out) != "ran 65534 65533" {
		t.Fatalf("uid and gid: reported %q, printed %q", report, out)
	}
}

// struct sock_fprog's length is 16 bits and the kernel takes at most
// BPF_MAXINSNS (4096) instructions: a longer program must be refused, not
// cut short (65537 instructions would install only the first).
func TestLauncherBoundsTheSeccompProgram(t *testing.T) {
	host(t)
	allow := func(n int) string {
		// BPF_RET|BPF_K, SECCOMP_RET_ALLOW: code 0x0006, jt 0, jf 0, k 0x7fff0000 (little-endian).
		return strings.Repeat(hex.EncodeToString([]byte{0x06, 0, 0, 0, 0, 0, 0xff, 0x7f}), n)
	}
	cmd := []string{"no_new_privs", "1", "path", "/bin/sh", "arg", "sh", "arg", "-c", "arg", "echo ran"}
	for _, n := range []int{4097, 65537} {
		report, out := rawLaunch(t, t.TempDir(), "", kvs(append([]string{"seccomp", allow(n)}, cmd...)...))
		refused(t, "a seccomp program of "+strconv.Itoa(n)+" instructions", report, out, "the kernel takes 1 to 4096")
	}
	report, out := rawLaunch(t, t.TempDir(), "", kvs(append([]string{"seccomp", allow(4096)}, cmd...)...))
	if report != "" || strings.TrimSpace(out) != "ran" {
		t.Fatalf("a seccomp program of 4096 instructions: reported %q, printed %q", report, out)
	}
}

// After its mounts the launcher enters its working directory again, so the
// command sees it through them. A directory it cannot name again (here: a
// path longer than PATH_MAX) fails the launch; before, the command ran in
// the directory as it was, writing under a read-only cover.
func TestLauncherFailsWhenItCannotReenterTheDirectory(t *testing.T) {
	host(t)
	if os.Geteuid() != 0 {
		t.Skip("a private mount namespace made by the launcher itself needs root")
	}
	ws := t.TempDir()
	write := []string{"path", "/bin/sh", "arg", "sh", "arg", "-c", "arg", "echo x > written && echo ran"}
	cover := []string{"mountns", "1", "readonly", ws}
	// A short path: re-entered, so the read-only cover applies.
	report, out := rawLaunch(t, ws, "", kvs(append(cover, write...)...))
	if report != "" || strings.Contains(out, "ran") || !strings.Contains(out, "Read-only file system") {
		t.Fatalf("under a read-only cover: reported %q, printed %q; want the write refused", report, out)
	}
	// 24 levels of 200 characters: more than PATH_MAX (4096).
	deep := "n=$(printf '%0200d' 0); for i in $(seq 24); do mkdir \"$n\" && cd -P \"$n\" || exit 1; done"
	report, out = rawLaunch(t, ws, deep, kvs(append(cover, write...)...))
	refused(t, "a working directory longer than PATH_MAX", report, out, "finding the working directory to re-enter it")
}

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
