package hostfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// A file shared by link (the git identity) is root's and read-only to the
// command: its uid reads it through its TMPDIR, cannot write it (what it
// holds would reach that uid's later executions), and may only remove its
// own link; another body or uid gets another file, and root gets none.
func TestLinkSharedIsReadOnlyToTheCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("shares only between a root termd and another uid: needs root")
	}
	h := newTestFS(t)
	uid, gid := int(agent.Uid), int(agent.Gid)
	var links []string
	for _, id := range []string{"e1", "e2", "e3"} {
		tmp, err := h.PrivateTmp(id, uid, gid)
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, filepath.Join(tmp, "termd-gitconfig"))
	}
	const body = "[user]\n\tname = \"nobody\"\n"
	for _, l := range links[:2] {
		if err := h.LinkShared(filepath.Dir(l), filepath.Base(l), body, uid); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := os.Lstat(links[0])
	b, _ := os.Lstat(links[1])
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Fatalf("the two executions' links are not one file: %v %v", a, b)
	}
	if st := a.Sys().(*syscall.Stat_t); st.Uid != 0 || a.Mode().Perm() != 0o644 || !a.Mode().IsRegular() {
		t.Fatalf("the shared file is uid %d mode %v, want root's regular 0644", st.Uid, a.Mode())
	}
	// As the command's user: reading works, writing does not, removing its link does.
	asUser := func(script string, args ...string) error {
		cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		return cmd.Run()
	}
	if err := asUser(`grep -q nobody "$1"`, links[0]); err != nil {
		t.Errorf("the command cannot read its git identity: %v", err)
	}
	if err := asUser(`printf '[core]\n\thooksPath = /tmp\n' >> "$1"`, links[0]); err == nil {
		t.Errorf("the command wrote the file its uid's later executions share")
	}
	if err := asUser(`chmod 666 "$1"`, links[0]); err == nil {
		t.Errorf("the command changed the shared file's mode")
	}
	if err := asUser(`rm -f "$1"`, links[0]); err != nil {
		t.Errorf("the command cannot remove its own link: %v", err)
	}
	if got, err := os.ReadFile(links[1]); err != nil || string(got) != body {
		t.Errorf("the other execution's file holds %q (%v), want %q", got, err, body)
	}
	// Another body is another file; root is never given a shared one.
	if err := h.LinkShared(filepath.Dir(links[2]), filepath.Base(links[2]), body+"\temail = x\n", uid); err != nil {
		t.Fatal(err)
	}
	if c, _ := os.Lstat(links[2]); c == nil || os.SameFile(b, c) {
		t.Errorf("another body shares the first one's file")
	}
	if err := h.LinkShared(filepath.Dir(links[2]), "root-gitconfig", body, 0); err == nil {
		t.Errorf("a command run as root was given a shared file")
	}
}
