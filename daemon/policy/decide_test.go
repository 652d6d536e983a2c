package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

// Real binaries: identity, hash, exec plan.
func TestDecisionRecordsIdentityAndPlan(t *testing.T) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip("no /usr/bin/git")
	}
	ws := t.TempDir()
	p := Default()
	ctx := decision.Context{Workspaces: []string{ws}}
	d := p.Decide(decision.Request{Argv: []string{"git", "status"}, Cwd: ws}, ctx)
	if d.Verdict != verdict.Allow || d.Risk != verdict.RiskLow || !d.ReadOnly {
		t.Fatalf("git status: %s %s %v", d.Verdict, d.Risk, d.Reasons)
	}
	data, _ := os.ReadFile(d.ResolvedPath)
	sum := sha256.Sum256(data)
	if d.ResolvedPath != "/usr/bin/git" || d.BinarySHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("identity %s %s", d.ResolvedPath, d.BinarySHA256)
	}
	if d.ExecArgv[0] != "git" || d.ExecArgv[len(d.ExecArgv)-1] != "status" || !grammar.Contains(d.ExecArgv, "core.hooksPath=/dev/null") || !grammar.Contains(d.ExecArgv, "core.fsmonitor=false") {
		t.Fatalf("exec argv %q", d.ExecArgv)
	}
	if d.ExecEnv["GIT_CONFIG_NOSYSTEM"] != "1" || d.ExecEnv["GIT_CONFIG_GLOBAL"] != "/dev/null" || d.ExecEnv["GIT_TERMINAL_PROMPT"] != "0" {
		t.Fatalf("exec env %v", d.ExecEnv)
	}
	if strings.Join(d.Argv, " ") != "git status" || d.PolicyVersion != p.Version() || len(d.RequestHash) != 64 || d.Mode != verdict.ModeConfirm {
		t.Fatalf("decision fields %+v", d)
	}
	// /bin is a symlink to /usr/bin here: same file, accepted.
	if d2 := p.Decide(decision.Request{Argv: []string{"/bin/git", "status"}, Cwd: ws}, ctx); d2.Verdict != verdict.Allow || d2.ResolvedPath != d.ResolvedPath {
		t.Fatalf("/bin/git: %s %v", d2.Verdict, d2.Reasons)
	}
	// string form and argv form hash the same canonical request
	d3 := p.Decide(decision.Request{Command: "git status", Cwd: ws}, ctx)
	if d3.RequestHash != d.RequestHash {
		t.Fatal("string and argv forms hash differently")
	}
	d4 := p.Decide(decision.Request{Argv: []string{"git", "status", "-s"}, Cwd: ws}, ctx)
	if d4.RequestHash == d.RequestHash {
		t.Fatal("different requests hash the same")
	}
	ex := p.Explain(decision.Request{Argv: []string{"git", "status"}, Cwd: ws}, ctx)
	if ex.RequestHash != d.RequestHash || ex.Verdict != verdict.Allow || len(ex.Steps) < 5 || !strings.Contains(string(ex.Request), `"argv":["git","status"]`) {
		t.Fatalf("explain %+v", ex)
	}
	names := map[string]bool{}
	for _, s := range ex.Steps {
		names[s.Name] = true
	}
	for _, n := range []string{"mode", "input", "cwd", "escape", "identity", "grammar", "paths", "rules", "effects", "verdict"} {
		if !names[n] {
			t.Errorf("explain lacks step %s: %+v", n, ex.Steps)
		}
	}
}

func TestModes(t *testing.T) {
	f := newFixture(t)
	type exp struct{ inspect, confirm, trusted verdict.Verdict }
	cases := []struct {
		argv []string
		want exp
	}{
		{[]string{"ls"}, exp{verdict.Allow, verdict.Allow, verdict.Allow}},
		{[]string{"touch", "x"}, exp{verdict.Deny, verdict.Ask, verdict.Allow}},
		{[]string{"make"}, exp{verdict.Deny, verdict.Ask, verdict.Allow}},
		{[]string{"go", "test", "./..."}, exp{verdict.Deny, verdict.Ask, verdict.Allow}},
		{[]string{"curl", "https://e.com"}, exp{verdict.Deny, verdict.Ask, verdict.Allow}},
		{[]string{"git", "push"}, exp{verdict.Deny, verdict.Ask, verdict.Allow}},
		{[]string{"git", "fetch"}, exp{verdict.Deny, verdict.Ask, verdict.Allow}},
		{[]string{"rm", "-rf", "."}, exp{verdict.Deny, verdict.Deny, verdict.Deny}},
		{[]string{"cat", "/etc/shadow"}, exp{verdict.Deny, verdict.Deny, verdict.Deny}},
		// Reads outside the workspace: only paths.public_read is free, in
		// inspect mode too; the rest of /etc asks.
		{[]string{"cat", "/etc/passwd"}, exp{verdict.Ask, verdict.Ask, verdict.Allow}},
		{[]string{"grep", "root", "/etc/group"}, exp{verdict.Ask, verdict.Ask, verdict.Allow}},
		{[]string{"cat", "/proc/mounts"}, exp{verdict.Ask, verdict.Ask, verdict.Allow}},
		{[]string{"cat", "/etc/os-release"}, exp{verdict.Allow, verdict.Allow, verdict.Allow}},
		{[]string{"cat", "/etc/hostname"}, exp{verdict.Allow, verdict.Allow, verdict.Allow}},
		{[]string{"head", "/proc/cpuinfo"}, exp{verdict.Allow, verdict.Allow, verdict.Allow}},
		{[]string{"cat", "/usr/include/stdio.h"}, exp{verdict.Allow, verdict.Allow, verdict.Allow}},
		{[]string{"ls", "/etc"}, exp{verdict.Allow, verdict.Allow, verdict.Allow}},
	}
	for _, c := range cases {
		for mode, want := range map[verdict.Mode]verdict.Verdict{verdict.ModeInspect: c.want.inspect, verdict.ModeConfirm: c.want.confirm, verdict.ModeTrusted: c.want.trusted} {
			d := f.decide(c.argv, mode)
			if d.Verdict != want {
				t.Errorf("%q in %s: %s, want %s (%v)", c.argv, mode, d.Verdict, want, d.Reasons)
			}
		}
	}
	// project code is never low risk
	for _, a := range [][]string{{"make"}, {"go", "build", "."}, {"go", "run", "."}, {"npm", "test"}, {"npm", "run", "x"}, {"cargo", "build"}, {"cargo", "test"}, {"pytest"}} {
		d := f.decide(a, verdict.ModeTrusted)
		if d.Risk == verdict.RiskLow || !d.RunsProjectCode {
			t.Errorf("%q: risk %s project code %v", a, d.Risk, d.RunsProjectCode)
		}
		if d := f.decide(a, verdict.ModeConfirm); d.Verdict != verdict.Ask {
			t.Errorf("%q confirm: %s %v", a, d.Verdict, d.Reasons)
		}
	}
}

func TestNetworkClassification(t *testing.T) {
	f := newFixture(t)
	net := [][]string{{"curl", "https://e.com"}, {"wget", "https://e.com"}, {"git", "fetch"}, {"git", "pull"}, {"git", "push"}, {"git", "clone", "https://e.com/r"}, {"npm", "install"}, {"pnpm", "add", "x"}, {"yarn", "install"}, {"go", "get", "x"}, {"go", "mod", "download"}, {"cargo", "fetch"}, {"cargo", "build"}}
	local := [][]string{{"ls"}, {"git", "status"}, {"go", "version"}, {"npm", "ls"}, {"make"}}
	for _, a := range net {
		if d := f.decide(a, verdict.ModeTrusted); !d.Network {
			t.Errorf("%q not classified as network", a)
		}
	}
	for _, a := range local {
		if d := f.decide(a, verdict.ModeTrusted); d.Network {
			t.Errorf("%q classified as network", a)
		}
	}
	f.pol = func() *Policy {
		p, err := Parse("n.yaml", []byte(strings.Replace(string(defaultYAML), "network: true", "network: false", 1)))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}()
	// the real trusted path; these decisions fail identity if missing, so only check the reason when found
	d := f.pol.Decide(decision.Request{Argv: []string{"curl", "https://e.com"}, Cwd: f.ws}, f.ctx)
	if d.Verdict != verdict.Deny {
		t.Fatalf("network denied policy allowed curl: %v", d.Reasons)
	}
	if _, err := os.Stat("/usr/bin/curl"); err == nil && !hasReason(d, "network") {
		t.Fatalf("reason lacks network: %v", d.Reasons)
	}
}

func TestOversizedInputDenied(t *testing.T) {
	f := newFixture(t)
	many := make([]string, MaxArgs+1)
	for i := range many {
		many[i] = "x"
	}
	many[0] = "echo"
	big := strings.Repeat("a", MaxArgBytes+1)
	total := []string{"echo"}
	for i := 0; i < 20; i++ {
		total = append(total, strings.Repeat("b", 60<<10))
	}
	for name, req := range map[string]decision.Request{
		"args":   {Argv: many},
		"arg":    {Argv: []string{"echo", big}},
		"total":  {Argv: total},
		"string": {Command: "echo " + strings.Repeat("c", MaxTotalArgv)},
		"nul":    {Argv: []string{"echo", "a\x00b"}},
		"both":   {Argv: []string{"ls"}, Command: "ls"},
		"none":   {},
		"negtim": {Argv: []string{"ls"}, Timeout: -1},
	} {
		req.Cwd = f.ws
		d := f.pol.Decide(req, f.ctx)
		if d.Verdict != verdict.Deny || len(d.Reasons) == 0 {
			t.Errorf("%s: %s %v", name, d.Verdict, d.Reasons)
		}
	}
	// just under the limits is fine
	ok := make([]string, MaxArgs)
	copy(ok, many)
	if d := f.pol.Decide(decision.Request{Argv: ok, Cwd: f.ws}, f.ctx); d.Verdict != verdict.Allow {
		t.Errorf("256 args: %s %v", d.Verdict, d.Reasons)
	}
}

func TestEnvAcceptedAndMandatory(t *testing.T) {
	f := newFixture(t)
	d := f.pol.Decide(decision.Request{Argv: []string{"ls"}, Cwd: f.ws, Env: map[string]string{"LANG": "C.UTF-8", "LC_ALL": "C"}}, f.ctx)
	if d.Verdict != verdict.Allow || d.Env["LANG"] != "C.UTF-8" || d.Env["LC_ALL"] != "C" {
		t.Fatalf("%s %v %v", d.Verdict, d.Env, d.Reasons)
	}
	for _, k := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "NODE_OPTIONS", "PYTHONSTARTUP", "PYTHONHOME", "PERL5OPT", "RUBYOPT", "JAVA_TOOL_OPTIONS", "BASH_ENV", "ENV", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF", "GIT_EXEC_PATH", "PAGER", "GIT_PAGER", "EDITOR", "VISUAL", "http_proxy", "HTTP_PROXY", "All_Proxy", "no_proxy", "RIPGREP_CONFIG_PATH", "PATH", "HOME", "IFS", "PROMPT_COMMAND", "GOFLAGS"} {
		d := f.pol.Decide(decision.Request{Argv: []string{"ls"}, Cwd: f.ws, Env: map[string]string{k: "x"}}, f.ctx)
		if d.Verdict != verdict.Deny || !hasReason(d, k) {
			t.Errorf("env %s: %s %v", k, d.Verdict, d.Reasons)
		}
	}
}

func TestPathContainment(t *testing.T) {
	if !toolspec.Within("/srv/work", "/srv/work/a") || toolspec.Within("/srv/work", "/srv/work-evil") || toolspec.Within("/srv/work", "/srv") || !toolspec.Within("/", "/x") || !toolspec.Within("/srv/work", "/srv/work") {
		t.Fatal("within")
	}
	f := newFixture(t)
	// symlink inside the workspace pointing outside: the write is outside
	if err := os.Symlink(f.out, f.ws+"/escape"); err != nil {
		t.Fatal(err)
	}
	d := f.decide([]string{"touch", "escape/x"}, verdict.ModeTrusted)
	if d.Verdict != verdict.Deny || !hasReason(d, "outside the workspace") {
		t.Fatalf("symlink escape: %v", d.Reasons)
	}
	// link/.. is resolved the way the kernel does: escape/.. is f.root
	d = f.decide([]string{"touch", "escape/../x"}, verdict.ModeTrusted)
	if d.Verdict != verdict.Deny {
		t.Fatalf("symlink dotdot: %v", d.Reasons)
	}
	// a not-yet-existing nested file inside the workspace
	d = f.decide([]string{"mkdir", "-p", "new/a/b"}, verdict.ModeTrusted)
	if d.Verdict != verdict.Allow || len(d.Writes) != 1 || d.Writes[0] != f.ws+"/new/a/b" {
		t.Fatalf("mkdir -p: %s %v %v", d.Verdict, d.Writes, d.Reasons)
	}
	// attached and = forms of path options are resolved
	for _, a := range [][]string{{"sort", "-o.bashrc", "data.txt"}, {"sort", "--output=.bashrc", "data.txt"}, {"sort", "--out=.bashrc", "data.txt"}, {"cp", "-t.git/hooks", "data.txt"}} {
		if d := f.decide(a, verdict.ModeTrusted); d.Verdict != verdict.Deny {
			t.Errorf("%q: %s %v", a, d.Verdict, d.Reasons)
		}
	}
}

// A workspace name of a file that also lives outside (a hard link): writing
// it changes the outside file, so it is not an ordinary workspace write.
func TestHardLinkedWorkspaceFiles(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, f.out+"/profile", "x\n")
	if err := os.Link(f.out+"/profile", f.ws+"/profile.txt"); err != nil {
		t.Skip("no hard links here:", err)
	}
	if d := f.decide([]string{"touch", "data.txt"}, verdict.ModeTrusted); d.Verdict != verdict.Allow {
		t.Fatalf("ordinary workspace write: %s %v", d.Verdict, d.Reasons)
	}
	for _, argv := range [][]string{{"touch", "profile.txt"}, {"sed", "-i", "s/x/y/", "profile.txt"}, {"cp", "data.txt", "profile.txt"}} {
		if d := f.decide(argv, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "hard-linked") {
			t.Errorf("%q may write through a hard link: %s %v", argv, d.Verdict, d.Reasons)
		}
	}
	// Reading a world-readable hard-linked file is ordinary.
	if d := f.decide([]string{"cat", "profile.txt"}, verdict.ModeTrusted); d.Verdict != verdict.Allow {
		t.Errorf("cat of a readable hard link: %s %v", d.Verdict, d.Reasons)
	}
	// One only its owner can read may be someone's secret under another name.
	if err := os.Chmod(f.out+"/profile", 0o600); err != nil {
		t.Fatal(err)
	}
	if d := f.decide([]string{"cat", "profile.txt"}, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "hard-linked") {
		t.Errorf("cat of a private hard link: %s %v", d.Verdict, d.Reasons)
	}
}

// git must not find a repository around the workspace (a home directory
// under git): it is told to stop at the workspace root's parent, and never
// to fetch missing objects lazily.
func TestGitStaysInsideTheWorkspace(t *testing.T) {
	f := newFixture(t)
	d := f.decide([]string{"git", "status"}, verdict.ModeTrusted)
	if d.Verdict != verdict.Allow {
		t.Fatalf("git status: %s %v", d.Verdict, d.Reasons)
	}
	if got := d.ExecEnv["GIT_CEILING_DIRECTORIES"]; got != filepath.Dir(f.ws) {
		t.Errorf("GIT_CEILING_DIRECTORIES = %q, want %q", got, filepath.Dir(f.ws))
	}
	if d.ExecEnv["GIT_NO_LAZY_FETCH"] != "1" {
		t.Errorf("GIT_NO_LAZY_FETCH not set: %v", d.ExecEnv)
	}
}

// An approval of project code covers the entry files it runs: the request
// hash changes when the Makefile does (an approved recipe swapped afterwards
// makes the plan stale).
func TestProjectEntryFilesAreBoundToTheRequest(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, f.ws+"/Makefile", "all:\n\techo reviewed\n")
	a := f.decide([]string{"make"}, verdict.ModeConfirm)
	if !a.RunsProjectCode || a.ProjectFiles[f.ws+"/Makefile"] == "" || a.ProjectFiles[f.ws+"/Makefile"] == "absent" {
		t.Fatalf("make: project files %v", a.ProjectFiles)
	}
	mustWrite(t, f.ws+"/Makefile", "all:\n\techo swapped\n")
	b := f.decide([]string{"make"}, verdict.ModeConfirm)
	if a.RequestHash == b.RequestHash {
		t.Fatal("the request hash did not change when the Makefile did")
	}
	// A Makefile whose digest cannot follow its content is refused.
	if err := os.Remove(f.ws + "/Makefile"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(f.ws+"/Makefile", 0o644); err != nil {
		t.Fatal(err)
	}
	if d := f.decide([]string{"make"}, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "cannot be bound") {
		t.Errorf("make with a FIFO Makefile: %s %v", d.Verdict, d.Reasons)
	}
	// A read-only command binds no project files.
	if d := f.decide([]string{"cat", "Makefile"}, verdict.ModeConfirm); len(d.ProjectFiles) != 0 {
		t.Fatalf("cat: %v", d.ProjectFiles)
	}
}

// wget -x -nH saves PATH without the HOST/ directory: that is the write.
func TestWgetNoHostDirectories(t *testing.T) {
	f := newFixture(t)
	for _, nh := range []string{"-nH", "--no-host-directories"} {
		d := f.decide([]string{"wget", "-x", nh, "https://example.com/src/main.go"}, verdict.ModeTrusted)
		if !grammar.Contains(d.Writes, f.ws+"/src/main.go") {
			t.Errorf("wget -x %s: writes %v, want %s", nh, d.Writes, f.ws+"/src/main.go")
		}
	}
}

// termd runs as root: a setuid file must not get new content or a copy with
// its mode, and a device only root can read is a secret like a 0600 file.
func TestSetIDFilesAndPrivateDevices(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make setuid files and device nodes")
	}
	f := newFixture(t)
	mustWrite(t, f.ws+"/suid", "#!/bin/true\n")
	if err := os.Chmod(f.ws+"/suid", 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{{"cp", "-p", "suid", "copy"}, {"cp", "-a", "suid", "copy"}, {"cp", "--preserve=mode", "suid", "copy"}, {"cp", "data.txt", "suid"}, {"touch", "suid"}} {
		if d := f.decide(argv, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "setuid") {
			t.Errorf("%q: %s %v", argv, d.Verdict, d.Reasons)
		}
	}
	for _, argv := range [][]string{{"cp", "suid", "copy"}, {"cp", "--preserve=timestamps", "suid", "copy"}, {"chmod", "u-s", "suid"}, {"rm", "suid"}} {
		if d := f.decide(argv, verdict.ModeTrusted); d.Verdict == verdict.Deny {
			t.Errorf("%q should not be denied: %v", argv, d.Reasons)
		}
	}
	dev := f.out + "/disk"
	if err := syscall.Mknod(dev, syscall.S_IFBLK|0o600, 7<<8); err != nil {
		t.Skip("mknod:", err)
	}
	if d := f.decide([]string{"head", "-c", "16", dev}, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "not readable") {
		t.Errorf("reading a root-only block device: %s %v", d.Verdict, d.Reasons)
	}
}

// Offline go inspection never runs cgo (the C preprocessor would read any
// #include), and git push never uses the local transport (a local
// receiving repository runs its own hooks).
func TestExecEnvClosesSideDoors(t *testing.T) {
	f := newFixture(t)
	if d := f.decide([]string{"go", "vet", "."}, verdict.ModeTrusted); d.ExecEnv["CGO_ENABLED"] != "0" {
		t.Errorf("go vet: exec env %v", d.ExecEnv)
	}
	d := f.decide([]string{"git", "push", "origin", "main"}, verdict.ModeTrusted)
	if p := d.ExecEnv["GIT_ALLOW_PROTOCOL"]; p == "" || strings.Contains(p, "file") {
		t.Errorf("git push: GIT_ALLOW_PROTOCOL=%q", p)
	}
	// go list stamps VCS info by running git, which would obey the
	// repository's core.fsmonitor: that git gets termd's settings too.
	d = f.decide([]string{"go", "list", "."}, verdict.ModeTrusted)
	fsmonitorOff := false
	for k, v := range d.ExecEnv {
		if strings.HasPrefix(k, "GIT_CONFIG_KEY_") && v == "core.fsmonitor" {
			fsmonitorOff = d.ExecEnv["GIT_CONFIG_VALUE_"+strings.TrimPrefix(k, "GIT_CONFIG_KEY_")] == "false"
		}
	}
	if !fsmonitorOff || d.ExecEnv["GIT_CONFIG_COUNT"] == "" || d.ExecEnv["GOFLAGS"] != "-buildvcs=false" {
		t.Errorf("go list: exec env %v", d.ExecEnv)
	}
}

// tar applies -C in turn: "-C d -C x" is d/x, through whatever d/x links to.
func TestTarChdirIsCumulative(t *testing.T) {
	f := newFixture(t)
	if err := os.Symlink(f.out, f.ws+"/dir/x"); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{{"tar", "-xf", "a.tar", "-C", "dir", "-C", "x"}, {"tar", "-cf", "o.tar", "-C", "dir", "-C", "x", "root-only.conf"}} {
		if d := f.decide(argv, verdict.ModeTrusted); d.Verdict != verdict.Deny {
			t.Errorf("%q: %s %v", argv, d.Verdict, d.Reasons)
		}
	}
}

// A checkout's .npmrc can move npm's installs to /usr (location=global),
// its user config onto a root-only file, or its cache outside: refused.
// A go.mod linked to a root-only file is read like any root-only file.
func TestHostileProjectConfig(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, f.ws+"/src/.npmrc", "registry=https://registry.example.com/\nlocation=global\n")
	for _, argv := range [][]string{{"npm", "install", "--ignore-scripts", "x"}, {"npm", "ls"}, {"npm", "config", "get", "x"}} {
		d := f.decideIn(argv, f.ws+"/src", verdict.ModeTrusted)
		if d.Verdict != verdict.Deny || !hasReason(d, "sets location") {
			t.Errorf("%q under a .npmrc with location=global: %s %v", argv, d.Verdict, d.Reasons)
		}
	}
	if d := f.decideIn([]string{"npm", "ls"}, f.ws+"/dir", verdict.ModeTrusted); d.Verdict == verdict.Deny {
		t.Errorf("npm ls without a hostile .npmrc: %v", d.Reasons)
	}
	if err := os.Symlink(f.out+"/root-only.conf", f.ws+"/dir/go.mod"); err != nil {
		t.Fatal(err)
	}
	if d := f.decideIn([]string{"go", "list", "-m"}, f.ws+"/dir", verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "not readable") {
		t.Errorf("go list with go.mod linked to a root-only file: %s %v", d.Verdict, d.Reasons)
	}
	// git config never follows include.path (it would by default).
	if d := f.decide([]string{"git", "config", "--get", "x.y"}, verdict.ModeTrusted); !grammar.Contains(d.ExecArgv, "--no-includes") {
		t.Errorf("git config exec argv %q", d.ExecArgv)
	}
}

// Seventh pass: project files found by searching upwards, other spellings
// of .npmrc keys, files read by fixed names in .git.
func TestProjectFilesFoundUpwardsAndInGit(t *testing.T) {
	f := newFixture(t)
	secret := f.out + "/root-only.conf"
	deny := func(name string, argv []string, cwd string, why string) {
		t.Helper()
		if d := f.decideIn(argv, cwd, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, why) {
			t.Errorf("%s: %q in %s: %s %v", name, argv, cwd, d.Verdict, d.Reasons)
		}
	}
	mustWrite(t, f.ws+"/dir/.npmrc", "\"logs-dir\"=/tmp/x\n")
	deny("quoted .npmrc key", []string{"npm", "ls"}, f.ws+"/dir", "sets logs-dir")
	mustWrite(t, f.ws+"/dir/.npmrc", "logs-${NODE_ENV}=/tmp/x\n")
	deny("${VAR} .npmrc key", []string{"npm", "ls"}, f.ws+"/dir", "cannot check")
	if err := os.Remove(f.ws + "/dir/.npmrc"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.ws+"/src/.npmrc", "userconfig=/tmp/x\n")
	deny("npm -C DIR reads DIR/.npmrc", []string{"npm", "ls", "-C", "src"}, f.ws, "sets userconfig")
	if err := os.Symlink(secret, f.ws+"/src/sub/go.work"); err != nil {
		t.Fatal(err)
	}
	deny("go.work found by search", []string{"go", "list", "./..."}, f.ws+"/src/sub", "not readable")
	// npm runs the nearest package.json above cwd: a change to it after
	// approval makes the plan stale.
	mustWrite(t, f.ws+"/package.json", `{"scripts":{"test":"echo ok"}}`)
	a := f.decideIn([]string{"npm", "test"}, f.ws+"/build", verdict.ModeConfirm)
	mustWrite(t, f.ws+"/package.json", `{"scripts":{"test":"id"}}`)
	if b := f.decideIn([]string{"npm", "test"}, f.ws+"/build", verdict.ModeConfirm); a.RequestHash == b.RequestHash {
		t.Errorf("npm test from a subdirectory: the parent package.json is not bound (%v)", a.ProjectFiles)
	}
	mustWrite(t, f.ws+"/package.json", `{"workspaces":["build"]}`)
	if err := os.Symlink(secret, f.ws+"/build/package.json"); err != nil {
		t.Fatal(err)
	}
	deny("workspace member package.json", []string{"npm", "ls"}, f.ws, "not readable")
	if err := os.Symlink(secret, f.ws+"/.git/packed-refs"); err != nil {
		t.Fatal(err)
	}
	deny("git packed-refs link", []string{"git", "status"}, f.ws, "not readable")
	deny("curl -w %output", []string{"curl", "-w", "%output{/tmp/x}%{http_code}", "https://example.com/"}, f.ws, "%output")
	// A .git file sends git to the repository it names: that one is read.
	mustWrite(t, f.out+"/priv/HEAD", "ref: refs/heads/main\n")
	if err := os.Chmod(f.out+"/priv", 0o700); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.ws+"/src/sub/.git", "gitdir: "+f.out+"/priv\n")
	deny("gitfile to a private repository", []string{"git", "log", "-p"}, f.ws+"/src/sub", "not searchable")
}

// awk takes "name=value" as an assignment only when name is a valid
// variable name; "1=x" or "s.x=1" is a file, and a link by that name can
// point anywhere.
func TestAwkFileOperandThatLooksLikeAnAssignment(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"1=x", "s.x=1"} {
		if err := os.Symlink(f.out+"/root-only.conf", f.ws+"/"+name); err != nil {
			t.Fatal(err)
		}
		if d := f.decide([]string{"awk", "{print}", name}, verdict.ModeTrusted); d.Verdict != verdict.Deny {
			t.Errorf("awk reading %s (a link to a root-only file): %s %v", name, d.Verdict, d.Reasons)
		}
	}
	if d := f.decide([]string{"awk", "{print x}", "x=/etc/passwd", "data.txt"}, verdict.ModeTrusted); d.Verdict != verdict.Allow {
		t.Errorf("a real assignment operand: %s %v", d.Verdict, d.Reasons)
	}
}

// Programs other packages' tests run, with the real default policy.
func TestDefaultPolicyRealPrograms(t *testing.T) {
	ws := t.TempDir()
	p := Default()
	ctx := decision.Context{Workspaces: []string{ws}}
	for _, a := range [][]string{{"/bin/true"}, {"true"}, {"echo", "hi"}, {"sleep", "0"}, {"printf", "%s", "x"}, {"cat", "f"}, {"ls"}, {"pwd"}, {"false"}} {
		d := p.Decide(decision.Request{Argv: a, Cwd: ws}, ctx)
		if d.Verdict != verdict.Allow || d.Risk != verdict.RiskLow || d.BinarySHA256 == "" {
			t.Errorf("%q: %s %s %v", a, d.Verdict, d.Risk, d.Reasons)
		}
	}
	for _, a := range [][]string{{"touch", "f"}, {"mkdir", "d"}, {"rm", "f"}} {
		if d := p.Decide(decision.Request{Argv: a, Cwd: ws, Mode: verdict.ModeTrusted}, ctx); d.Verdict != verdict.Allow {
			t.Errorf("%q trusted: %s %v", a, d.Verdict, d.Reasons)
		}
		if d := p.Decide(decision.Request{Argv: a, Cwd: ws}, ctx); d.Verdict != verdict.Ask {
			t.Errorf("%q confirm: %s %v", a, d.Verdict, d.Reasons)
		}
	}
	// A binary copied into the workspace is project code, not the tool its
	// name says: it asks (high risk) and no rule for `true` applies to it.
	data, err := os.ReadFile("/usr/bin/true")
	if err == nil {
		os.WriteFile(ws+"/true", data, 0o755)
		for _, a0 := range []string{ws + "/true", "./true"} {
			d := p.Decide(decision.Request{Argv: []string{a0}, Cwd: ws}, ctx)
			if d.Verdict != verdict.Ask || d.Risk != verdict.RiskHigh || !d.RunsProjectCode || len(d.Rules) != 0 || d.ResolvedPath != ws+"/true" {
				t.Errorf("workspace binary %s: %s %s rules %v %v", a0, d.Verdict, d.Risk, d.Rules, d.Reasons)
			}
			if d := p.Decide(decision.Request{Argv: []string{a0}, Cwd: ws, Mode: verdict.ModeInspect}, ctx); d.Verdict != verdict.Deny {
				t.Errorf("workspace binary %s in inspect mode: %s", a0, d.Verdict)
			}
		}
	}
}

// ls /etc is what docs/POLICY.md says: a system read at medium risk. A
// directory holding a secret still asks when its files' contents are read.
func TestListingASystemDirectoryIsAMediumRead(t *testing.T) {
	p := Default()
	ws := t.TempDir()
	ctx := decision.Context{Workspaces: []string{ws}}
	for _, a := range [][]string{{"ls", "/etc"}, {"ls", "-la", "/etc"}, {"stat", "/etc"}, {"realpath", "/etc"}} {
		d := p.Decide(decision.Request{Argv: a, Cwd: ws}, ctx)
		if d.Verdict != verdict.Allow || d.Risk != verdict.RiskMedium {
			t.Errorf("%q: %s %s %v; want allow at medium risk", a, d.Verdict, d.Risk, d.Reasons)
		}
	}
	for _, a := range [][]string{{"grep", "-r", "x", "/etc"}, {"git", "-C", "/etc", "log"}, {"tree", "/etc"}, {"ls", "-R", "/etc"}, {"du", "/etc"}} {
		if d := p.Decide(decision.Request{Argv: a, Cwd: ws}, ctx); d.Verdict == verdict.Allow {
			t.Errorf("%q: allowed; reading the files of /etc must not be", a)
		}
	}
}

// Output sent to /dev/null is not a write outside the workspace; any other
// path outside it still is.
func TestWriteToDevNull(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("b\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := Default()
	ctx := decision.Context{Workspaces: []string{ws}}
	d := p.Decide(decision.Request{Argv: []string{"sort", "-o", "/dev/null", "f"}, Cwd: ws, Mode: verdict.ModeTrusted}, ctx)
	if d.Verdict != verdict.Allow {
		t.Fatalf("sort -o /dev/null: %s %v", d.Verdict, d.Reasons)
	}
	d = p.Decide(decision.Request{Argv: []string{"sort", "-o", "/tmp/elsewhere", "f"}, Cwd: ws, Mode: verdict.ModeTrusted}, ctx)
	if d.Verdict != verdict.Deny {
		t.Fatalf("sort -o /tmp/elsewhere should stay denied: %s %v", d.Verdict, d.Reasons)
	}
}

// Project files the policy reads while it decides (.npmrc, package.json, a
// .git file, alternates) may be FIFOs or links to devices: the decision
// still comes back (a FIFO's open or read would hold it forever, /dev/zero
// would be read until termd runs out of memory), and what cannot be checked
// is refused, not skipped.
func TestProjectFilesThatNeverEnd(t *testing.T) {
	f := newFixture(t)
	fifo := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifo(f.ws + "/dir/.npmrc")
	if d := f.decideIn([]string{"npm", "ls"}, f.ws+"/dir", verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "cannot check") {
		t.Errorf("npm ls under a FIFO .npmrc: %s %v", d.Verdict, d.Reasons)
	}
	if err := os.Remove(f.ws + "/dir/.npmrc"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", f.ws+"/dir/.npmrc"); err != nil {
		t.Fatal(err)
	}
	if d := f.decideIn([]string{"npm", "ls"}, f.ws+"/dir", verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "cannot check") {
		t.Errorf("npm ls under a .npmrc linked to /dev/zero: %s %v", d.Verdict, d.Reasons)
	}
	mustWrite(t, f.ws+"/package.json", `{"workspaces":["member"]}`)
	fifo(f.ws + "/member/package.json")
	f.decideIn([]string{"npm", "ls"}, f.ws, verdict.ModeTrusted)
	fifo(f.ws + "/.git/objects/info/alternates")
	f.decide([]string{"git", "status"}, verdict.ModeTrusted)
	fifo(f.ws + "/src/sub/.git")
	f.decideIn([]string{"git", "log"}, f.ws+"/src/sub", verdict.ModeTrusted)
}
