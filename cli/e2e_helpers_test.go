package cli_test

// Helpers for termctl's end-to-end tests: each test starts a real termd
// (internal/harness) and runs the built termctl binary against it.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// agentConfig makes uid 65534 (harness.Nobody) an agent that may connect.
const agentConfig = "socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534]\n"

// start starts termd. Its policy asks for plain workspace writes
// (sandboxed_workspace_writes: ask): the tests use touch as their example of
// a command that needs approval.
func start(t *testing.T) *harness.Daemon {
	t.Helper()
	return harness.Start(t, harness.Options{AskWrites: true})
}

// startWithAgent starts termd with an agent principal (nobody) besides the
// test's own user, an operator when it is root.
func startWithAgent(t *testing.T) *harness.Daemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run termctl as a second user")
	}
	d := harness.Start(t, harness.Options{Config: agentConfig, AskWrites: true})
	// The agent's commands run as the agent: let it write in the workspace.
	if err := os.Chmod(d.Workspace, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// ok runs termctl and fails the test unless it exits 0.
func ok(t *testing.T, d *harness.Daemon, args ...string) string {
	t.Helper()
	out, errOut, code := d.Run("termctl", args...)
	if code != 0 {
		t.Fatalf("termctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// expect runs termctl and fails unless it exits with code.
func expect(t *testing.T, d *harness.Daemon, code int, args ...string) (string, string) {
	t.Helper()
	out, errOut, got := d.Run("termctl", args...)
	if got != code {
		t.Fatalf("termctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
	}
	return out, errOut
}

func decode[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not the expected JSON: %v\n%s", err, out)
	}
	return v
}

// planJSON is the part of `termctl plan -o json` the tests read.
type planJSON struct {
	ID            string `json:"id"`
	SessionID     string `json:"session_id"`
	State         string `json:"state"`
	ExecutionID   string `json:"execution_id"`
	ReplannedFrom string `json:"replanned_from"`
	NextStep      string `json:"next_step"`
	Decision      struct {
		Verdict      string   `json:"verdict"`
		Risk         string   `json:"risk"`
		Reasons      []string `json:"reasons"`
		RequestHash  string   `json:"request_hash"`
		ResolvedPath string   `json:"resolved_path"`
		Argv         []string `json:"argv"`
	} `json:"decision"`
	Preview struct {
		Program string `json:"program"`
		Summary string `json:"summary"`
	} `json:"preview"`
}

// plan plans argv (after --) with extra flags before it and returns the plan.
func plan(t *testing.T, d *harness.Daemon, flags []string, argv ...string) planJSON {
	t.Helper()
	args := append([]string{"plan", "-o", "json"}, flags...)
	args = append(append(args, "--"), argv...)
	return decode[planJSON](t, ok(t, d, args...))
}

// background is a termctl running while the test does other things.
type background struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{}
	code   int
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func startBackground(t *testing.T, d *harness.Daemon, args ...string) *background {
	t.Helper()
	b := &background{done: make(chan struct{})}
	b.cmd = exec.Command(harness.Bin(t, "termctl"), args...)
	b.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TERMD_SOCKET=" + d.Socket, "NO_COLOR=1"}
	b.cmd.Dir = d.Workspace
	b.cmd.Stdout = lockedWriter{&b.mu, &b.stdout}
	b.cmd.Stderr = lockedWriter{&b.mu, &b.stderr}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := b.cmd.Wait()
		b.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			b.code = ee.ExitCode()
		}
		close(b.done)
	}()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Signal(syscall.SIGKILL)
			<-b.done
		}
	})
	return b
}

func (b *background) output() (string, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stdout.String(), b.stderr.String()
}

// wait waits for the process to exit and returns its exit code.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-b.done:
		return b.code
	case <-time.After(90 * time.Second):
		out, errOut := b.output()
		t.Fatalf("termctl %v did not exit\nstdout:\n%s\nstderr:\n%s", b.cmd.Args[1:], out, errOut)
		return -1
	}
}

// eventually retries f until it reports true; it bounds a wait, it does not
// assert on time.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
