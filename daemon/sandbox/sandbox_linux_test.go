package sandbox_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/daemon/sandbox/launcher"
	"github.com/termd/termd/internal/program"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// bins builds termd-launch and the probe helper once per test process.
func bins(t testing.TB) (launcherPath, probe string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "termd-sandbox-bin-")
		if buildErr != nil {
			return
		}
		_ = os.Chmod(binDir, 0o755)
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		for _, pkg := range []string{"./cmd/termd-launch", "./daemon/sandbox/testdata/probe"} {
			cmd := exec.Command("go", "build", "-o", binDir+"/", pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "termd-launch"), filepath.Join(binDir, "probe")
}

// host returns what this machine enforces; tests that need full enforcement
// fail (never skip silently) under `make test`, where TERMD_REQUIRE_SANDBOX=1.
func host(t testing.TB) sandbox.Support {
	t.Helper()
	l, _ := bins(t)
	sup := sandbox.Probe(l)
	if m := sup.Missing(); len(m) > 0 {
		if os.Getenv("TERMD_REQUIRE_SANDBOX") == "1" {
			t.Fatalf("this host cannot enforce the sandbox: %s", strings.Join(m, "; "))
		}
		t.Skipf("this host cannot enforce the sandbox (%s); set TERMD_REQUIRE_SANDBOX=1 to make this a failure", strings.Join(m, "; "))
	}
	return sup
}

type fixture struct {
	t       *testing.T
	sup     sandbox.Support
	probe   string
	ws      string // workspace root
	outside string // a directory outside every root
	paths   sandbox.Paths
	run     *runner.Runner
}

func newFixture(t *testing.T) *fixture {
	sup := host(t)
	_, probe := bins(t)
	base := t.TempDir()
	f := &fixture{t: t, sup: sup, probe: probe, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{f.ws, f.outside, filepath.Join(base, "home"), filepath.Join(base, "tmp"), filepath.Join(f.ws, ".git", "hooks"), filepath.Join(f.ws, ".run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.ws, ".run", "receipts.key"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "data.txt"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.paths = sandbox.Paths{
		Workspaces:     []string{f.ws},
		SystemRead:     []string{"/usr", "/etc", "/lib", "/lib64", "/bin", "/sbin", "/proc", "/sys", "/dev/urandom"},
		Home:           filepath.Join(base, "home"),
		Tmp:            filepath.Join(base, "tmp"),
		Cwd:            f.ws,
		Hidden:         []string{filepath.Join(f.ws, ".run")},
		ProtectedNames: []string{".bashrc"},
		ProtectedDirs:  []string{".vscode"},
	}
	r, err := runner.New("")
	if err != nil {
		t.Fatal(err)
	}
	f.run = r
	return f
}

// do runs the probe under profile p (nil = no sandbox) and returns its output.
func (f *fixture) do(p *domain.Profile, args ...string) string {
	f.t.Helper()
	spec := runner.Spec{Path: f.probe, Argv: append([]string{f.probe}, args...), Dir: f.ws, Timeout: 20 * time.Second}
	if p != nil {
		// No network namespace here: what refuses the network is the
		// sandbox's own Landlock TCP rule (the daemon adds the namespace).
		p.Exec = program.Exec(f.probe) // as the policy names it
		l, rec, err := sandbox.Prepare(*p, f.paths, sandbox.Required, f.sup)
		if err != nil {
			f.t.Fatal(err)
		}
		if rec.Level != sandbox.LevelFull {
			f.t.Fatalf("enforcement %s, missing %v", rec.Level, rec.Missing)
		}
		spec.Launch = l
	}
	proc, err := f.run.Start(spec)
	if err != nil {
		f.t.Fatal(err)
	}
	res := proc.Wait()
	if res.Err != nil {
		return "spawn: " + res.Err.Error()
	}
	return strings.TrimSpace(string(res.Stdout.Kept) + string(res.Stderr.Kept))
}

var (
	readOnly       = domain.Profile{Profile: domain.ReadOnly}
	workspaceWrite = domain.Profile{Profile: domain.WorkspaceWrite}
)

func expect(t *testing.T, got, prefix, what string) {
	t.Helper()
	if !strings.HasPrefix(got, prefix) {
		t.Errorf("%s: got %q, want %q…", what, got, prefix)
	}
}

func TestReadOnlyProfile(t *testing.T) {
	f := newFixture(t)
	ro := readOnly
	expect(t, f.do(&ro, "read", filepath.Join(f.ws, "data.txt")), "ok", "read-only reads the workspace")
	expect(t, f.do(&ro, "write", filepath.Join(f.ws, "new.txt")), "denied", "read-only writes the workspace")
	expect(t, f.do(&ro, "exec", "/bin/sh"), "denied", "read-only execs /bin/sh")
	expect(t, f.do(&ro, "write", filepath.Join(f.paths.Tmp, "scratch")), "ok", "read-only writes its private TMPDIR")
	// Without the sandbox the same probes succeed: the test can fail.
	expect(t, f.do(nil, "write", filepath.Join(f.ws, "new.txt")), "ok", "unconfined write")
	expect(t, f.do(nil, "exec", "/bin/sh"), "executed", "unconfined exec")
}

func TestWorkspaceWriteProfile(t *testing.T) {
	f := newFixture(t)
	ww := workspaceWrite
	expect(t, f.do(&ww, "write", filepath.Join(f.ws, "new.txt")), "ok", "workspace-write writes the workspace")
	expect(t, f.do(&ww, "write", filepath.Join(f.outside, "x")), "denied", "workspace-write writes outside")
	expect(t, f.do(&ww, "write", filepath.Join(f.ws, ".git", "hooks", "pre-commit")), "denied", "workspace-write writes .git/hooks")
	if _, err := os.Stat(filepath.Join(f.ws, ".git", "hooks", "pre-commit")); err == nil {
		t.Error(".git/hooks/pre-commit was created")
	}
	got := f.do(&ww, "read", filepath.Join(f.ws, ".run", "receipts.key"))
	if got == "ok" {
		t.Errorf("termd's key inside the workspace was readable: %q", got)
	}
	expect(t, f.do(&ww, "exec", "/bin/sh"), "executed", "workspace-write may run system programs")
	expect(t, f.do(nil, "write", filepath.Join(f.outside, "x")), "ok", "unconfined write outside")
}

func TestNoNetworkNoSignalsNoPtrace(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ww := workspaceWrite
	expect(t, f.do(&ww, "connect", ln.Addr().String()), "denied", "connect without network")
	withNet := domain.Profile{Profile: domain.WorkspaceWrite, Network: true}
	expect(t, f.do(&withNet, "connect", ln.Addr().String()), "ok", "connect with network")
	outsider := exec.Command("sleep", "30")
	if err := outsider.Start(); err != nil {
		t.Fatal(err)
	}
	defer outsider.Process.Kill()
	pid := strconv.Itoa(outsider.Process.Pid)
	expect(t, f.do(&ww, "kill", pid), "denied", "signal a process outside the execution")
	expect(t, f.do(&ww, "ptrace", pid), "denied", "ptrace a process outside the execution")
	expect(t, f.do(nil, "kill", pid), "ok", "unconfined signal")
}

func TestRootLosesCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: checks that a command run as root has no capability")
	}
	f := newFixture(t)
	locked := filepath.Join(f.ws, "locked")
	if err := os.WriteFile(locked, []byte("x"), 0o000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(locked, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	ww := workspaceWrite
	expect(t, f.do(&ww, "settime"), "denied", "set the clock")
	expect(t, f.do(&ww, "module"), "denied", "load a module")
	expect(t, f.do(&ww, "read", locked), "denied", "read through CAP_DAC_READ_SEARCH")
	expect(t, f.do(&ww, "unshare-user"), "denied", "new user namespace")
	expect(t, f.do(nil, "read", locked), "ok", "unconfined root read")
}

// The race of the sandbox issue: while the command runs, the workspace owner
// swaps a workspace directory with a symbolic link to a directory outside.
// The Landlock rule is bound to the workspace's inode, so no write lands
// outside, whichever way the swap goes.
func TestSymlinkExchangeRaceCannotEscape(t *testing.T) {
	f := newFixture(t)
	sub := filepath.Join(f.ws, "sub")
	link := filepath.Join(f.ws, "link")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.outside, link); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var swaps atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) == nil {
				swaps.Add(1)
			}
		}
	}()
	ww := workspaceWrite
	for i := 0; i < 40; i++ {
		f.do(&ww, "write", filepath.Join(sub, fmt.Sprintf("FILE%d", i)))
	}
	stop.Store(true)
	<-done
	if swaps.Load() == 0 {
		t.Fatal("the race never swapped")
	}
	ents, _ := os.ReadDir(f.outside)
	if len(ents) > 0 {
		t.Fatalf("%d writes escaped the workspace into %s", len(ents), f.outside)
	}
}

// Best effort on a host (or a broker) that knows no sandbox runs the command
// unconfined and records that, instead of failing to start it.
func TestBestEffortWithoutSupportRunsUnconfined(t *testing.T) {
	l, rec, err := sandbox.Prepare(domain.Profile{Profile: domain.ReadOnly}, sandbox.Paths{}, sandbox.BestEffort, sandbox.Support{})
	if err != nil || l != nil || rec.Level != sandbox.LevelNone || len(rec.Missing) == 0 {
		t.Fatalf("launch %v, record %+v, error %v", l, rec, err)
	}
	if _, _, err := sandbox.Prepare(domain.Profile{Profile: domain.ReadOnly}, sandbox.Paths{}, sandbox.Required, sandbox.Support{}); err == nil {
		t.Fatal("required without support must refuse")
	}
}

// A command run by a pre-started launcher (the spawn pool) is confined
// exactly like one whose launcher starts inline (TERMD_SPAWN_POOL=0): the
// same answers to writes outside the workspace, the network, signals, the
// same uid, gid, groups and directory, its own cgroup with the plan's
// limits; and no two executions share a launcher, a cgroup or a network
// namespace.
func TestPooledLauncherConfinedLikeInline(t *testing.T) {
	f, inline := newPoolFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	uid, gid := os.Getuid(), os.Getgid()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		uid, gid = 65534, 65534
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{65534}}
		for _, d := range []string{f.ws, f.paths.Tmp, f.outside} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		// t.TempDir's directories are private to root.
		for d := filepath.Dir(f.ws); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func(r *runner.Runner, args ...string) (string, runner.Result, bool) {
		t.Helper()
		l := f.workspaceWriteLaunch()
		spec := runner.Spec{Path: f.probe, Argv: append([]string{f.probe}, args...), Dir: f.ws, Timeout: 20 * time.Second,
			NoNetwork: true, RequireNoNetwork: true, PidsMax: 37, MemoryMax: 96 << 20, Credential: cred, Launch: l}
		proc, err := r.Start(spec)
		if err != nil {
			t.Fatal(err)
		}
		res := proc.Wait()
		if res.Err != nil {
			return "spawn: " + res.Err.Error(), res, proc.Prestarted()
		}
		return strings.TrimSpace(string(res.Stdout.Kept) + string(res.Stderr.Kept)), res, proc.Prestarted()
	}
	// The first sandboxed spawn names the launcher binary; the pool fills then.
	run(f.run, "read", filepath.Join(f.ws, "data.txt"))
	pooledRuns, recycled := 0, 0
	cgroups := map[string]bool{}
	outsider := exec.Command("sleep", "30")
	if err := outsider.Start(); err != nil {
		t.Fatal(err)
	}
	defer outsider.Process.Kill()
	cases := [][]string{
		{"write", filepath.Join(f.outside, "x")},
		{"write", filepath.Join(f.ws, "new.txt")},
		{"write", filepath.Join(f.ws, ".git", "hooks", "pre-commit")},
		{"read", filepath.Join(f.ws, ".run", "receipts.key")},
		{"connect", ln.Addr().String()},
		{"kill", strconv.Itoa(outsider.Process.Pid)},
		{"whoami"},
	}
	for round := 0; round < 3; round++ {
		for _, c := range cases {
			time.Sleep(20 * time.Millisecond) // let the pool refill
			want, wantRes, pre := run(inline, c...)
			if pre {
				t.Fatal("a runner without pools used a pre-started launcher")
			}
			got, res, pre := run(f.run, c...)
			if pre {
				pooledRuns++
			}
			if round == 0 {
				t.Logf("%v: pre-started %v: %q; inline: %q", c, pre, got, want)
			}
			if strings.HasPrefix(c[0], "whoami") {
				// Equal but for the cgroup, which is each execution's own.
				trim := func(s string) string { s, _, _ = strings.Cut(s, " cgroup="); return s }
				if trim(got) != trim(want) || !strings.HasPrefix(want, fmt.Sprintf("uid=%d gid=%d ", uid, gid)) {
					t.Errorf("whoami: pooled %q, inline %q (want uid %d gid %d)", got, want, uid, gid)
				}
				inOwnCgroups(t, got, res)
				inOwnCgroups(t, want, wantRes) // an inline launcher joins its v1 cgroups after its fork
			} else if got != want {
				t.Errorf("%v: pre-started launcher (%v) answered %q, inline %q", c, pre, got, want)
			}
			if lim := strings.Join(res.Limits, ","); lim != strings.Join(wantRes.Limits, ",") || !strings.Contains(lim, "pids.max=37") || !res.NetNSApplied || !wantRes.NetNSApplied {
				t.Errorf("%v: limits %v netns %v, inline %v netns %v", c, res.Limits, res.NetNSApplied, wantRes.Limits, wantRes.NetNSApplied)
			}
			if cgroups[res.CgroupPath] && pre {
				recycled++ // one after another only: see TestRecycledCgroupsServeNextExecutionClean
			}
			cgroups[res.CgroupPath] = true
		}
	}
	t.Logf("%d of %d executions ran in a pre-started launcher, %d of them in a recycled cgroup", pooledRuns, 3*len(cases), recycled)
	if recycled == 0 {
		t.Errorf("no pre-started launcher waited in a cgroup an ended execution handed back (pool.Cgroups.ForLauncher)")
	}
	if want := 3 * len(cases) / 2; pooledRuns < want {
		t.Errorf("only %d of %d executions used a pre-started launcher (want at least %d)", pooledRuns, 3*len(cases), want)
	}
	// After an execution without limits (and without a launcher), pooled
	// cgroups are made without v1 ones; executions with limits then get
	// them, their pre-started launchers in them.
	proc, err := f.run.Start(runner.Spec{Path: "/bin/true", Timeout: 10 * time.Second, NoNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	proc.Wait()
	proc.Delivered()
	pooledRuns = 0
	for range 8 { // the launchers started before it, then new ones
		time.Sleep(20 * time.Millisecond)
		if got, res, pre := run(f.run, "whoami"); pre {
			pooledRuns++
			inOwnCgroups(t, got, res)
		}
	}
	if pooledRuns < 6 {
		t.Errorf("only %d of 8 executions used a pre-started launcher", pooledRuns)
	}
}

// inOwnCgroups checks that a probe's whoami ran in its execution's v2
// cgroup, and in its v1 pids and memory cgroups (hybrid hosts) where its
// limits are v1 ones.
func inOwnCgroups(t *testing.T, whoami string, res runner.Result) {
	t.Helper()
	_, cg, _ := strings.Cut(whoami, " cgroup=")
	cg, v1, _ := strings.Cut(cg, " v1=")
	v1, _, _ = strings.Cut(v1, " ")
	if !strings.HasSuffix(res.CgroupPath, cg) || cg == "" {
		t.Errorf("the command ran in cgroup %q, its result names %q", cg, res.CgroupPath)
	}
	for _, l := range res.Limits {
		rest, isV1 := strings.CutPrefix(l, "v1:")
		ctl, _, _ := strings.Cut(rest, ".")
		if isV1 && !slices.ContainsFunc(strings.Split(v1, ","), func(c string) bool {
			return strings.HasPrefix(c, ctl+":") && strings.HasSuffix(c, "/"+filepath.Base(res.CgroupPath))
		}) {
			t.Errorf("limit %s: the command's v1 cgroups are %q, not its execution's %s", l, v1, filepath.Base(res.CgroupPath))
		}
	}
}

// workspaceWriteLaunch prepares the workspace-write profile, fully
// enforced, for the probe.
func (f *fixture) workspaceWriteLaunch() *launcher.Launch {
	f.t.Helper()
	ww := workspaceWrite
	ww.Exec = program.Exec(f.probe)
	l, rec, err := sandbox.Prepare(ww, f.paths, sandbox.Required, f.sup)
	if err != nil || rec.Level != sandbox.LevelFull {
		f.t.Fatalf("prepare: %v %v", err, rec.Missing)
	}
	return l
}

// newPoolFixture is a fixture whose runner pre-starts launchers, and a
// runner that starts them inline.
func newPoolFixture(t *testing.T) (*fixture, *runner.Runner) {
	t.Helper()
	f := newFixture(t)
	inline, err := runner.NewWithOptions(runner.Options{NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inline.Close(); f.run.Close() })
	if f.run.CgroupParent() == "" || !f.run.Capabilities().NetNS {
		t.Skip("pre-started launchers need cgroups and network namespaces")
	}
	return f, inline
}

// A plan's pids limit bounds a command run by a pre-started launcher as it
// bounds one whose launcher starts inline: exactly as many processes as the
// limit (a pooled launcher joins its v1 pids cgroup after its fork, with no
// room kept for a spawning thread), and no fork past it.
func TestPooledLauncherPidsLimit(t *testing.T) {
	f, inline := newPoolFixture(t)
	const limit = 24
	run := func(r *runner.Runner) (string, bool) {
		t.Helper()
		l := f.workspaceWriteLaunch()
		proc, err := r.Start(runner.Spec{Path: f.probe, Argv: []string{f.probe, "forks"}, Dir: f.ws, Timeout: 20 * time.Second,
			NoNetwork: true, RequireNoNetwork: true, PidsMax: limit, Launch: l})
		if err != nil {
			t.Fatal(err)
		}
		res := proc.Wait()
		if len(res.Limits) == 0 {
			t.Skip("no pids controller here")
		}
		return strings.TrimSpace(string(res.Stdout.Kept) + string(res.Stderr.Kept)), proc.Prestarted()
	}
	check := func(how, got string) {
		t.Helper()
		if want := fmt.Sprintf(" current=%d max=%d", limit, limit); !strings.HasSuffix(got, want) || strings.HasPrefix(got, "forks=0 ") {
			t.Errorf("%s launcher, pids limit %d: %q, want forks refused at %s", how, limit, got, want)
		}
	}
	run(f.run) // names the launcher binary: the pool fills then
	pooled := 0
	for i := range 10 {
		if i == 4 {
			// Pooled cgroups are made without v1 ones after executions
			// without limits: the launchers in them (after the 4 already
			// pooled) join those the limits add at spawn.
			for range 3 {
				time.Sleep(50 * time.Millisecond)
				proc, err := f.run.Start(runner.Spec{Path: "/bin/true", Timeout: 10 * time.Second, NoNetwork: true})
				if err != nil {
					t.Fatal(err)
				}
				proc.Wait()
				proc.Delivered()
			}
		}
		time.Sleep(50 * time.Millisecond) // let the pool refill
		got, pre := run(f.run)
		if pre {
			pooled++
			check("pre-started", got)
		}
	}
	if pooled < 6 {
		t.Errorf("only %d of 10 executions used a pre-started launcher", pooled)
	}
	got, _ := run(inline)
	check("inline", got)
}

// A plan without limits run by a pre-started launcher that waited in v1
// pids and memory cgroups made with an earlier execution's limits (hybrid
// hosts) runs under no limit, not that execution's, and those cgroups go
// with its v2 cgroup at its end: removed with it, or kept with it when the
// pool reuses it (they were left, the launcher in them, before).
func TestPooledLauncherWithoutLimitsAfterLimits(t *testing.T) {
	f, _ := newPoolFixture(t)
	const limit = 24
	start := func(spec runner.Spec) (runner.Result, bool) {
		t.Helper()
		proc, err := f.run.Start(spec)
		if err != nil {
			t.Fatal(err)
		}
		res := proc.Wait()
		proc.Delivered()
		return res, proc.Prestarted()
	}
	whoami := func(pidsMax int64) runner.Spec {
		return runner.Spec{Path: f.probe, Argv: []string{f.probe, "whoami"}, Dir: f.ws, Timeout: 20 * time.Second,
			NoNetwork: true, RequireNoNetwork: true, PidsMax: pidsMax, Launch: f.workspaceWriteLaunch()}
	}
	if res, _ := start(whoami(limit)); !slices.ContainsFunc(res.Limits, func(l string) bool { return strings.HasPrefix(l, "v1:pids") }) {
		t.Fatalf("this test needs a v1 pids hierarchy for the limit (a hybrid host): limits %v", res.Limits)
	}
	// The pools' cgroups are made with the latest limits of an execution
	// that took a pooled cgroup; then every launcher waiting was made so.
	for range 3 {
		start(runner.Spec{Path: "/bin/true", Timeout: 10 * time.Second, NoNetwork: true, PidsMax: limit})
	}
	for range 5 {
		time.Sleep(50 * time.Millisecond)
		start(whoami(limit))
	}
	pooled := 0
	for range 3 {
		awaitPooled(t)
		res, pre := start(whoami(0))
		got := strings.TrimSpace(string(res.Stdout.Kept) + string(res.Stderr.Kept))
		if !pre {
			continue
		}
		pooled++
		if len(res.Limits) != 0 || !(strings.HasSuffix(got, " v1pids.max=none") || strings.HasSuffix(got, " v1pids.max=max")) {
			t.Errorf("a plan without limits in a pre-started launcher: limits %v, %q", res.Limits, got)
		}
		_, v1, _ := strings.Cut(got, " v1=")
		v1, _, _ = strings.Cut(v1, " ")
		for _, c := range strings.Split(v1, ",") {
			ctl, path, _ := strings.Cut(c, ":")
			if strings.HasSuffix(path, "/"+filepath.Base(res.CgroupPath)) {
				dir := filepath.Join("/sys/fs/cgroup", ctl, path)
				for deadline := time.Now().Add(5 * time.Second); exists(dir) && !exists(res.CgroupPath) && time.Now().Before(deadline); {
					time.Sleep(20 * time.Millisecond) // removed after the result
				}
				if exists(dir) && !exists(res.CgroupPath) {
					t.Errorf("its v1 %s cgroup %s is left 5 s after its end, without its v2 cgroup", ctl, path)
				}
			}
		}
		start(whoami(limit)) // the next launcher is made with limits again
	}
	if pooled == 0 {
		t.Error("no execution without limits used a pre-started launcher")
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// A pre-started launcher runs nothing before it is released: the command
// has not run while BeforeRelease waits (the launcher has its configuration
// and has confined itself by then), runs once it returns, and never runs
// when it fails.
func TestPooledLauncherWaitsForRelease(t *testing.T) {
	f := newFixture(t)
	defer f.run.Close()
	if f.run.CgroupParent() == "" || !f.run.Capabilities().NetNS {
		t.Skip("pre-started launchers need cgroups and network namespaces")
	}
	start := func(marker string, release func() error) (runner.Result, bool) {
		t.Helper()
		ro := workspaceWrite
		ro.Exec = program.Exec(f.probe)
		l, _, err := sandbox.Prepare(ro, f.paths, sandbox.Required, f.sup)
		if err != nil {
			t.Fatal(err)
		}
		proc, err := f.run.Start(runner.Spec{Path: f.probe, Argv: []string{f.probe, "write", marker}, Dir: f.ws, Timeout: 20 * time.Second,
			NoNetwork: true, Launch: l, BeforeRelease: release})
		if err != nil {
			t.Fatal(err)
		}
		return proc.Wait(), proc.Prestarted()
	}
	start(filepath.Join(f.ws, "warm-up"), nil) // names the launcher: the pool fills
	for i := 0; i < 3; i++ {
		marker := filepath.Join(f.ws, fmt.Sprintf("ran-%d", i))
		var early error
		awaitPooled(t)
		res, pre := start(marker, func() error {
			time.Sleep(300 * time.Millisecond)
			if _, err := os.Stat(marker); err == nil {
				early = fmt.Errorf("%s exists before the release", marker)
			}
			return nil
		})
		if early != nil {
			t.Fatal(early)
		}
		if res.Err != nil || res.Status != runner.StatusSucceeded || !pre {
			t.Fatalf("released run: %+v (pre-started %v)", res, pre)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the command did not run after its release: %v", err)
		}
		refused := filepath.Join(f.ws, fmt.Sprintf("refused-%d", i))
		awaitPooled(t)
		res, pre = start(refused, func() error { return fmt.Errorf("the intent could not be recorded") })
		if res.Err == nil || !strings.Contains(res.Err.Error(), "the intent could not be recorded") || !pre {
			t.Fatalf("refused release: %v (pre-started %v)", res.Err, pre)
		}
		time.Sleep(100 * time.Millisecond)
		if _, err := os.Stat(refused); err == nil {
			t.Fatal("the command ran although its release failed")
		}
	}
	// Closing the runner (termd shutting down) ends the launchers it holds.
	if n := pooledChildren(t); n == 0 {
		t.Fatal("no pre-started launcher waits under this process")
	}
	f.run.Close()
	if n := pooledChildren(t); n != 0 {
		t.Fatalf("%d pre-started launchers still run after Close", n)
	}
}

// The mount namespace a launcher made for its command is held by the runner
// until the execution's result was delivered, so that the command's exit is
// not held up by the namespace's teardown (the kernel does it in the exiting
// task before the parent hears of the exit); once delivered (or a second after
// the result when nobody says so), nothing of it is left open, whether the
// launcher was pre-started or inline.
func TestMountNamespaceHeldUntilDelivered(t *testing.T) {
	f := newFixture(t)
	defer f.run.Close()
	if f.run.CgroupParent() == "" || !f.run.Capabilities().NetNS {
		t.Skip("pre-started launchers need cgroups and network namespaces")
	}
	inline, err := runner.NewWithOptions(runner.Options{NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	defer inline.Close()
	// held lists this process's descriptors on mount namespaces.
	held := func() map[string]int {
		m := map[string]int{}
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "mnt:[") {
				m[l]++
			}
		}
		return m
	}
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	prestarted := 0
	for i, r := range []*runner.Runner{f.run, f.run, f.run, f.run, inline, inline} {
		if i > 0 && r == f.run {
			awaitPooled(t)
		}
		ww := workspaceWrite
		ww.Exec = program.Exec(f.probe)
		l, rec, err := sandbox.Prepare(ww, f.paths, sandbox.Required, f.sup)
		if err != nil || !rec.MountNS {
			t.Fatalf("prepare: %v (mount namespace %v)", err, rec.MountNS)
		}
		proc, err := r.Start(runner.Spec{Path: f.probe, Argv: []string{f.probe, "mntns"}, Dir: f.ws, Timeout: 20 * time.Second, NoNetwork: true, Launch: l})
		if err != nil {
			t.Fatal(err)
		}
		res := proc.Wait()
		ns := strings.TrimSpace(string(res.Stdout.Kept))
		if res.Status != runner.StatusSucceeded || !strings.HasPrefix(ns, "mnt:[") {
			t.Fatalf("run %d: %s %q %q %v", i, res.Status, res.Stdout.Kept, res.Stderr.Kept, res.Err)
		}
		if proc.Prestarted() {
			prestarted++
		}
		if ns == own {
			t.Fatalf("run %d: the command ran in this process's mount namespace %s", i, ns)
		}
		seen = append(seen, ns)
		if held()[ns] != 1 {
			t.Errorf("run %d (pre-started %v): the command's mount namespace %s is not held after its exit (held: %v)", i, proc.Prestarted(), ns, held())
		}
		if i == 3 {
			// Nobody says the result was delivered: let go a second after it.
			for deadline := time.Now().Add(5 * time.Second); held()[ns] != 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		} else {
			proc.Delivered()
		}
		if n := held()[ns]; n != 0 {
			t.Errorf("run %d: %d descriptors on the command's mount namespace %s are left after its result was delivered", i, n, ns)
		}
	}
	if prestarted == 0 {
		t.Error("no execution ran in a pre-started launcher")
	}
	after := held()
	for _, ns := range seen {
		if after[ns] != 0 {
			t.Errorf("the mount namespace %s is still held after all results were delivered", ns)
		}
	}
}

// awaitPooled waits until a pre-started launcher waits for its execution
// (the pool refills in the background, later on a loaded machine).
func awaitPooled(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); pooledChildren(t) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no pre-started launcher after 10 s")
		}
	}
	time.Sleep(10 * time.Millisecond) // from its start into the pool
}

// pooledChildren counts the pre-started launchers this process started.
func pooledChildren(t *testing.T) int {
	t.Helper()
	return len(waitingLaunchers(t))
}

// waitingLaunchers lists this process's children that are launchers waiting
// for their configuration or release.
func waitingLaunchers(t *testing.T) []int {
	t.Helper()
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(cmd) != "termd-launch\x00pooled\x00" && string(cmd) != "termd-launch\x00" {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(os.Getpid()) {
			pid, _ := strconv.Atoi(e.Name())
			pids = append(pids, pid)
		}
	}
	return pids
}

// An inline launcher (no pool, or a plan a pre-started one cannot serve) is
// started like a pre-started one: it gets its configuration at once and
// confines itself while BeforeRelease waits (for the intent), so that work is
// not between the intent and the command; it runs the command only after
// the release, and nothing when the release fails.
func TestInlineLauncherConfinesBeforeRelease(t *testing.T) {
	f := newFixture(t)
	f.run.Close() // no pre-started launcher under this process
	r, err := runner.NewWithOptions(runner.Options{NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := func(marker string, release func() error) runner.Result {
		t.Helper()
		ww := workspaceWrite
		ww.Exec = program.Exec(f.probe)
		l, _, err := sandbox.Prepare(ww, f.paths, sandbox.Required, f.sup)
		if err != nil {
			t.Fatal(err)
		}
		proc, err := r.Start(runner.Spec{Path: f.probe, Argv: []string{f.probe, "write", marker}, Dir: f.ws, Timeout: 20 * time.Second,
			NoNetwork: true, Launch: l, BeforeRelease: release})
		if err != nil {
			t.Fatal(err)
		}
		if proc.Prestarted() {
			t.Fatal("a runner without pools used a pre-started launcher")
		}
		return proc.Wait()
	}
	// confined waits until the one waiting launcher has no_new_privs and its
	// seccomp filter, which it sets last before waiting for the go-ahead.
	confined := func() error {
		var status string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			pids := waitingLaunchers(t)
			if len(pids) != 1 {
				status = fmt.Sprintf("%d waiting launchers", len(pids))
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
			if err != nil {
				status = err.Error()
				continue
			}
			status = string(b)
			if strings.Contains(status, "\nNoNewPrivs:\t1\n") && strings.Contains(status, "\nSeccomp:\t2\n") {
				return nil
			}
		}
		return fmt.Errorf("the launcher did not confine itself before its release:\n%s", status)
	}
	for i := 0; i < 3; i++ {
		marker := filepath.Join(f.ws, fmt.Sprintf("ran-%d", i))
		var early error
		res := start(marker, func() error {
			early = confined()
			if _, err := os.Stat(marker); err == nil {
				early = fmt.Errorf("%s exists before the release", marker)
			}
			return nil
		})
		if early != nil {
			t.Fatal(early)
		}
		if res.Err != nil || res.Status != runner.StatusSucceeded {
			t.Fatalf("released run: %+v", res)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the command did not run after its release: %v", err)
		}
		refused := filepath.Join(f.ws, fmt.Sprintf("refused-%d", i))
		res = start(refused, func() error { return fmt.Errorf("the intent could not be recorded") })
		if res.Err == nil || !strings.Contains(res.Err.Error(), "the intent could not be recorded") {
			t.Fatalf("refused release: %v", res.Err)
		}
		time.Sleep(100 * time.Millisecond)
		if _, err := os.Stat(refused); err == nil {
			t.Fatal("the command ran although its release failed")
		}
		if n := pooledChildren(t); n != 0 {
			t.Fatalf("%d launchers still wait after a refused release", n)
		}
	}
}

// A cache directory's grant binds to the directory below HOME, opened
// without following a link: one swapped for a link to a directory outside
// after termd made it grants nothing there (the rest of the profile holds).
func TestCacheGrantFollowsNoLink(t *testing.T) {
	f := newFixture(t)
	real := filepath.Join(f.paths.Home, ".cache", "real")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(f.paths.Home, ".cache", "linked")
	if err := os.Symlink(f.outside, link); err != nil {
		t.Fatal(err)
	}
	ro := readOnly
	ro.Cache = []string{"~/.cache/real", "~/.cache/linked"} // as the policy names them, beneath HOME
	expect(t, f.do(&ro, "write", filepath.Join(real, "x")), "ok", "read-only writes its cache")
	expect(t, f.do(&ro, "write", filepath.Join(f.outside, "x")), "denied", "a cache linked outside")
	expect(t, f.do(&ro, "write", filepath.Join(f.ws, "x")), "denied", "read-only writes the workspace")
	if _, err := os.Lstat(filepath.Join(f.outside, "x")); err == nil {
		t.Error("the command wrote outside through its cache's link")
	}
}
