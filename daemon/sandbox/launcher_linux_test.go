package sandbox_test

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
