package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
)

// fixture is a temporary world: a trusted bin directory with stand-in
// programs (symlinks to the real `true`), a workspace, a home and
// termd-protected files.
type fixture struct {
	root, bin, ws, home, out, prot string
	pol                            *Policy
	ctx                            decision.Context
}

var fixturePrograms = strings.Fields(`ls cat head tail wc stat file du df pwd grep egrep fgrep rg fd fdfind find sort uniq cut tr diff
sed awk mawk gawk tar gzip gunzip zcat cp mv rm rmdir mkdir touch ln chmod git go make npm pnpm yarn cargo pytest curl wget sleep echo
date env true false printf yes python3 node perl ruby php bash sh zsh dash timeout nice nohup xargs watch flock script busybox
stdbuf setsid strace ssh sudo su doas pkexec nc dd base64 uv more top htop
jq which ps uname seq id whoami hostname tree realpath sha256sum md5sum cmp comm column xxd od strings free uptime lsof less time
gofmt npx ruff black mypy`)

func mustWrite(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The policy denies reads outside the workspace of what other users
	// cannot read; t.TempDir directories are 0700.
	for _, d := range []string{root, filepath.Dir(root)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{root: root, bin: root + "/bin", ws: root + "/ws", home: root + "/home", out: root + "/out", prot: root + "/prot"}
	for _, d := range []string{f.bin, f.ws + "/src/sub", f.ws + "/dir", f.ws + "/build", f.ws + "/.git/hooks", f.home + "/.ssh", f.home + "/.aws", f.home + "/.config/systemd/user", f.out, f.prot, root + "/ws-evil"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	trueBin := "/usr/bin/true"
	for _, p := range fixturePrograms {
		if err := os.Symlink(trueBin, f.bin+"/"+p); err != nil {
			t.Fatal(err)
		}
	}
	// a look-alike binary outside the trusted PATH
	if err := os.Symlink("/usr/bin/false", f.out+"/ls"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/false", f.ws+"/ls"); err != nil {
		t.Fatal(err)
	}
	for _, fl := range []string{"data.txt", "README.md", "src/main.go", ".git/config", "script.sh", "x.py", "a.tar"} {
		mustWrite(t, f.ws+"/"+fl, "x\n")
	}
	if err := os.Symlink(f.ws+"/.git/hooks", f.ws+"/linkdir"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.home+"/.ssh/id_rsa", "secret")
	mustWrite(t, f.home+"/.aws/credentials", "secret")
	mustWrite(t, f.home+"/.bashrc", "")
	mustWrite(t, f.prot+"/key", "k")
	mustWrite(t, f.out+"/root-only.conf", "password=x")
	if err := os.Chmod(f.out+"/root-only.conf", 0o600); err != nil {
		t.Fatal(err)
	}
	f.pol = policyWithPath(t, f.bin)
	f.ctx = decision.Context{Workspaces: []string{f.ws}, Protected: []string{f.prot}, Home: f.home}
	return f
}

// policyWithPath is the default policy with another trusted PATH.
func policyWithPath(t testing.TB, dirs ...string) *Policy {
	t.Helper()
	src := string(defaultYAML)
	old := "trusted_path: [/usr/local/bin, /usr/bin, /bin, /usr/local/go/bin]"
	if !strings.Contains(src, old) {
		t.Fatal("default policy trusted_path line changed; update the test helper")
	}
	src = strings.Replace(src, old, "trusted_path: ["+strings.Join(dirs, ", ")+"]", 1)
	p, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) subst(s string) string {
	r := strings.NewReplacer("{ws}", f.ws, "{home}", f.home, "{out}", f.out, "{prot}", f.prot, "{bin}", f.bin)
	return r.Replace(s)
}

func (f *fixture) decide(argv []string, mode verdict.Mode) decision.Decision {
	return f.decideIn(argv, f.ws, mode)
}

func (f *fixture) decideIn(argv []string, cwd string, mode verdict.Mode) decision.Decision {
	return f.pol.Decide(decision.Request{Argv: argv, Cwd: cwd, Mode: mode}, f.ctx)
}

func hasReason(d decision.Decision, sub string) bool {
	for _, r := range d.Reasons {
		if strings.Contains(r, sub) {
			return true
		}
	}
	return false
}
