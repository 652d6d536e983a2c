// Package harness runs the real binaries for end-to-end tests: it builds the
// four binaries once per test process, starts a real termd on a temporary
// socket and state directory, waits until it answers, and prints the
// daemon's log when a test fails.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/client"
	"github.com/termd/termd/daemon/policy"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// repoRoot finds the module root from this source file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BuildTags are the build tags of the binaries, as `make build` uses them.
const BuildTags = "grpcnotrace"

// testTags are the tags Bin builds with: BuildTags plus termdtest, which
// gives termd the TERMD_TEST_STALL hook the crash tests hold it with
// (daemon/teststall_termdtest.go). Binaries given in TERMD_TEST_BIN need it
// too, or those tests wait in vain for termd to stall.
const testTags = BuildTags + ",termdtest"

// Bin returns the path of a built binary (termd, termctl, termd-mcp, termd-gateway).
func Bin(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		if d := os.Getenv("TERMD_TEST_BIN"); d != "" {
			binDir = d
			return
		}
		sweepBinDirs()
		binDir, buildErr = os.MkdirTemp("", "termd-bin-")
		if buildErr != nil {
			return
		}
		markOwner(binDir)
		_ = os.Chmod(binDir, 0o755) // tests run clients as other uids
		args := []string{"build", "-tags", testTags, "-o", binDir + string(os.PathSeparator)}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/...")
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/...: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	p := filepath.Join(binDir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("binary %s was not built: %v", name, err)
	}
	return p
}

// Options tune a test daemon.
type Options struct {
	// Config is YAML written to the config file (socket, state_dir and
	// workspaces are set by the harness unless the YAML sets them).
	Config string
	// Policy is YAML for a policy file; empty uses the embedded default.
	Policy string
	// AskWrites runs the embedded default policy with
	// sandboxed_workspace_writes: ask, for tests that use a plain write
	// (touch x) as their example of a command that needs approval: with the
	// default (allow) a fully enforced sandbox lets it run at once.
	AskWrites bool
	// Args are extra termd flags.
	Args []string
	// Env are extra environment variables for termd.
	Env []string
	// Socket overrides the socket path (default: inside the test directory).
	Socket string
	// Workspace overrides the workspace (default: work/ inside the test
	// directory); it must exist.
	Workspace string
	// Bin runs this termd binary (with the termd-launch beside it) instead
	// of the one built from this tree: A/B against another build in one run.
	Bin string
	// NetNS runs termd inside this network namespace (a NetHost's Name;
	// see NewNetHosts): its socket stays a path in the test directory.
	NetNS string
}

// Daemon is a running termd.
type Daemon struct {
	t          testing.TB
	Dir        string
	Socket     string
	StateDir   string
	Workspace  string
	ConfigPath string
	PolicyPath string
	LogPath    string
	Client     *client.Client

	cmd   *exec.Cmd
	done  chan struct{}
	bin   string
	args  []string
	env   []string
	netns string
}

// Start starts termd and waits until it answers.
func Start(t testing.TB, o Options) *Daemon {
	t.Helper()
	bin := o.Bin
	if bin == "" {
		bin = Bin(t, "termd")
	}
	dir, err := os.MkdirTemp("", "termd-test-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755) // tests run clients as other uids
	d := &Daemon{
		t:         t,
		Dir:       dir,
		Socket:    filepath.Join(dir, "run", "termd.sock"),
		StateDir:  filepath.Join(dir, "state"),
		Workspace: filepath.Join(dir, "work"),
		LogPath:   filepath.Join(dir, "termd.log"),
	}
	if o.Socket != "" {
		d.Socket = o.Socket
	}
	if o.Workspace != "" {
		d.Workspace = o.Workspace
	}
	if err := os.MkdirAll(d.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	d.Workspace, _ = filepath.EvalSymlinks(d.Workspace)
	args := []string{"--socket", d.Socket, "--state-dir", d.StateDir, "--workspace", d.Workspace}
	if o.Config != "" {
		d.ConfigPath = filepath.Join(dir, "termd.yaml")
		if err := os.WriteFile(d.ConfigPath, []byte(o.Config), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", d.ConfigPath)
	}
	if o.AskWrites {
		if o.Policy != "" {
			t.Fatal("harness: AskWrites is the embedded default policy; set sandboxed_workspace_writes in Policy instead")
		}
		o.Policy = AskWritesPolicy(t)
	}
	if o.Policy != "" {
		d.PolicyPath = filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(d.PolicyPath, []byte(o.Policy), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--policy", d.PolicyPath)
	}
	d.args = append(args, o.Args...)
	d.env = o.Env
	d.bin = bin
	d.netns = o.NetNS
	d.start()
	t.Cleanup(d.cleanup)
	return d
}

func (d *Daemon) start() {
	t := d.t
	t.Helper()
	logf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{d.bin}, d.args...)
	if d.netns != "" {
		// nsenter execs termd: the pid is termd's.
		argv = append(nsenterArgv(d.netns), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = append(baseEnv(), d.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	d.cmd = cmd
	d.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(d.done) }()
	c, err := client.Dial(d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	d.Client = c
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- c.WaitReady(ctx) }()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("termd did not become ready: %v\n%s", err, d.Log())
		}
	case <-d.done:
		t.Fatalf("termd exited at start: %v\n%s", cmd.ProcessState, d.Log())
	}
}

// AskWritesPolicy is the embedded default policy with
// sandboxed_workspace_writes: ask.
func AskWritesPolicy(t testing.TB) string {
	t.Helper()
	const line = "sandboxed_workspace_writes: allow"
	def := string(policy.DefaultYAML())
	if !strings.Contains(def, line) {
		t.Fatalf("harness: the default policy no longer says %q; update AskWritesPolicy", line)
	}
	return strings.Replace(def, line, "sandboxed_workspace_writes: ask", 1)
}

// baseEnv is a small environment for child binaries.
func baseEnv() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8"}
	if v := os.Getenv("GOCOVERDIR"); v != "" {
		env = append(env, "GOCOVERDIR="+v)
	}
	return env
}

// Log returns the daemon's log so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.LogPath)
	return string(b)
}

// Pid is the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Signal sends sig to the daemon.
func (d *Daemon) Signal(sig syscall.Signal) {
	_ = d.cmd.Process.Signal(sig)
}

// Wait waits for the daemon to exit (after a signal) and returns its exit state.
func (d *Daemon) Wait(timeout time.Duration) (*os.ProcessState, bool) {
	select {
	case <-d.done:
		return d.cmd.ProcessState, true
	case <-time.After(timeout):
		return nil, false
	}
}

// Stop sends SIGTERM and waits for a clean exit.
func (d *Daemon) Stop() {
	d.t.Helper()
	d.Signal(syscall.SIGTERM)
	if _, ok := d.Wait(30 * time.Second); !ok {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		d.t.Errorf("termd did not stop within 30s of SIGTERM\n%s", d.Log())
	}
	if d.Client != nil {
		d.Client.Close()
		d.Client = nil
	}
}

// Kill9 kills the daemon with SIGKILL (children it started are not signalled).
func (d *Daemon) Kill9() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	if d.Client != nil {
		d.Client.Close()
		d.Client = nil
	}
}

// Restart starts the daemon again with the same flags (after Stop or Kill9).
func (d *Daemon) Restart() {
	d.t.Helper()
	select {
	case <-d.done:
	default:
		// A second termd would find the first on the socket and exit, and
		// the test would go on talking to the first, never restarted.
		d.t.Fatal("Restart: termd is still running; call Stop or Kill9 first")
	}
	d.start()
}

func (d *Daemon) cleanup() {
	select {
	case <-d.done:
	default:
		d.Signal(syscall.SIGTERM)
		if _, ok := d.Wait(20 * time.Second); !ok {
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
	}
	if d.Client != nil {
		d.Client.Close()
	}
	if d.t.Failed() {
		d.t.Logf("termd log (%s):\n%s", d.LogPath, d.Log())
	}
	_ = os.RemoveAll(d.Dir)
}

// Run runs a built binary (e.g. termctl) against this daemon and returns its
// stdout, stderr and exit code.
func (d *Daemon) Run(name string, args ...string) (stdout, stderr string, code int) {
	return d.RunEnv(name, nil, args...)
}

// RunEnv is Run with extra environment variables.
func (d *Daemon) RunEnv(name string, env []string, args ...string) (string, string, int) {
	return d.RunAs(nil, name, env, args...)
}

// Nobody is the credential of the unprivileged user tests use as a second principal.
var Nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// RunAs runs a built binary as another user (cred nil: as the test's user).
func (d *Daemon) RunAs(cred *syscall.Credential, name string, env []string, args ...string) (string, string, int) {
	d.t.Helper()
	return d.run(cred, nil, name, env, args)
}

// RunInput is Run with in as the binary's standard input (a pipe).
func (d *Daemon) RunInput(in io.Reader, name string, args ...string) (string, string, int) {
	d.t.Helper()
	return d.run(nil, in, name, nil, args)
}

func (d *Daemon) run(cred *syscall.Credential, in io.Reader, name string, env, args []string) (string, string, int) {
	d.t.Helper()
	cmd := exec.Command(Bin(d.t, name), args...)
	cmd.Stdin = in
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		env = append([]string{"HOME=/tmp"}, env...)
	}
	cmd.Env = append(append(baseEnv(), "TERMD_SOCKET="+d.Socket, "NO_COLOR=1"), env...)
	cmd.Dir = d.Workspace
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			d.t.Fatalf("running %s %s: %v", name, strings.Join(args, " "), err)
		}
	}
	return out.String(), errb.String(), code
}

// RequireEnv is set by `make test`: a test whose real component (a browser,
// node packages, an outside program) is missing fails instead of skipping, so
// CI cannot pass by not running it. A developer's focused `go test` skips.
const RequireEnv = "TERMD_TEST_REQUIRE_ALL"

// Missing skips t because a real component it needs is missing, saying how
// to get it; when RequireEnv is set (make test) it fails instead.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("%s (%s is set: `make test` runs every test with its real components; run ./scripts/ci-deps.sh)", msg, RequireEnv)
	}
	t.Skip(msg)
}
