package doctor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoctorHomes: doctor checks the base of the commands' private homes,
// its .tmp (the TMPDIRs) and each configured principal's HOME. Healthy (not
// made yet, or made right): OK. A base that is a file, a link, or another
// user's directory, and a HOME that is a link: FAIL, with what to do.
func TestDoctorHomes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test chowns a directory to another uid: run it as root (as CI does)")
	}
	dir := t.TempDir() // 0700, root's: the sibling <state>-home is used
	state, base := filepath.Join(dir, "state"), filepath.Join(dir, "state-home")
	cfg := filepath.Join(dir, "termd.yaml")
	if err := os.WriteFile(cfg, []byte("roles:\n  agents: {uids: [65534]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func() (string, int) {
		t.Helper()
		return doctor(t, "--config", cfg, "--socket", filepath.Join(dir, "none.sock"), "--state-dir", state)
	}

	out, code := run()
	if code != 0 || strings.Contains(out, "FAIL ") {
		t.Fatalf("doctor before the first execution: exit %d\n%s", code, out)
	}
	wantLine(t, out, `^OK +homes +the base of the commands' private homes .*state-home does not exist yet: termd makes it \(mode 0711\)`)
	wantLine(t, out, `^OK +homes +HOME of nobody \(uid 65534\) .*state-home/65534 does not exist yet`)

	// The base is a file: every execution would fail.
	if err := os.WriteFile(base, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = run()
	if code == 0 {
		t.Fatalf("doctor passed with a file as the homes' base:\n%s", out)
	}
	wantLine(t, out, `^FAIL +homes +the base of the commands' private homes .*state-home is a regular file, not a directory`)
	wantLine(t, out, `fix: move it away \(mv .*state-home .*state-home.old\): termd makes the directory itself`)

	// Another user's directory.
	os.Remove(base)
	if err := os.Mkdir(base, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(base, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	out, code = run()
	if code == 0 {
		t.Fatalf("doctor passed with another user's homes' base:\n%s", out)
	}
	wantLine(t, out, `^FAIL +homes +the base of the commands' private homes .*state-home is owned by uid 65534, not termd's user \(uid 0\)`)
	wantLine(t, out, `fix: chown 0 .*state-home`)

	// Healthy again, with .tmp made; an agent's HOME that is a link fails.
	if err := os.Chown(base, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(base, ".tmp"), 0o711); err != nil {
		t.Fatal(err)
	}
	out, code = run()
	if code != 0 || strings.Contains(out, "FAIL ") {
		t.Fatalf("doctor with a healthy base: exit %d\n%s", code, out)
	}
	wantLine(t, out, `^OK +homes +the base of the commands' private homes .*state-home: a directory of termd's user, mode 0711, on a writable file system`)
	wantLine(t, out, `^OK +homes +the base of the executions' TMPDIRs .*state-home/.tmp: a directory of termd's user, mode 0711`)
	if err := os.Symlink("/etc", filepath.Join(base, "65534")); err != nil {
		t.Fatal(err)
	}
	out, code = run()
	if code == 0 {
		t.Fatalf("doctor passed with a link as an agent's HOME:\n%s", out)
	}
	wantLine(t, out, `^FAIL +homes +HOME of nobody \(uid 65534\) .*state-home/65534 is a symbolic link`)
	wantLine(t, out, `fix: remove the link \(rm .*state-home/65534\): termd makes the directory itself`)
}
