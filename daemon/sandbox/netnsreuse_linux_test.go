package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/daemon/netns"
	"github.com/termd/termd/daemon/runner"
)

// A network namespace the runner reuses (an execution confined with no
// capability, not the host's root) serves the next execution only once
// nothing of the previous one is left in it: an execution that leaves a
// process in its own session holding an abstract unix listener, TCP and UDP
// sockets ends with that process killed, and a later execution that gets
// the same namespace finds no socket in it and nothing answering at those
// addresses. On a workspace loopback (shared by design), a listener of an
// ended execution is gone too.
func TestReusedNetnsKeepsNothingOfTheLastExecution(t *testing.T) {
	f, _ := newPoolFixture(t)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{65534}}
		for _, d := range []string{f.ws, f.paths.Tmp} {
			if err := os.Chown(d, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		for d := filepath.Dir(f.ws); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	name := fmt.Sprintf("termd-reuse-%d", os.Getpid())
	const port = "47031"
	run := func(join *netns.Handle, args ...string) (string, runner.Result) {
		t.Helper()
		spec := runner.Spec{Path: f.probe, Argv: append([]string{f.probe}, args...), Dir: f.ws, Timeout: 20 * time.Second,
			Credential: cred, Launch: f.workspaceWriteLaunch(), Env: []string{"TMPDIR=" + f.paths.Tmp}}
		if join != nil {
			spec.JoinNetNS, spec.NetNSFD = true, join.Fd()
		} else {
			spec.NoNetwork, spec.RequireNoNetwork = true, true
		}
		proc, err := f.run.Start(spec)
		if err != nil {
			t.Fatal(err)
		}
		res := proc.Wait()
		proc.Delivered()
		if res.Err != nil {
			t.Fatalf("%v: %v", args, res.Err)
		}
		return strings.TrimSpace(string(res.Stdout.Kept) + string(res.Stderr.Kept)), res
	}
	field := func(out, key string) string {
		for _, w := range strings.Fields(out) {
			if v, ok := strings.CutPrefix(w, key+"="); ok {
				return v
			}
		}
		return ""
	}
	gone := func(what, pid string) {
		t.Helper()
		// Dead: gone, or a zombie not reaped yet.
		if stat, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil && strings.Contains(string(stat), "(probe)") && !strings.Contains(string(stat), ") Z ") {
			t.Errorf("%s: the process it left (pid %s) outlived its execution: %s", what, pid, stat)
		}
	}
	run(nil, "whoami") // names the launcher binary; the pools fill then
	time.Sleep(50 * time.Millisecond)

	left, res := run(nil, "leave", name, port)
	ns, pid := field(left, "netns"), field(left, "pid")
	if !strings.HasPrefix(left, "left ") || ns == "" || field(left, "sockets") == "0" {
		t.Fatalf("the first execution did not leave its sockets behind: %q", left)
	}
	if res.Leftovers == 0 {
		t.Errorf("the first execution's end killed no leftover process (result %+v)", res)
	}
	gone("no network", pid)
	reused := false
	for i := 0; i < 40 && !reused; i++ {
		time.Sleep(10 * time.Millisecond) // the namespace is checked and made ready in the background
		got, _ := run(nil, "netstate", name, port)
		if field(got, "netns") == "" {
			t.Fatalf("netstate: %q", got)
		}
		if field(got, "sockets") != "0" || field(got, "abstract") != "no" || field(got, "tcp") != "no" {
			t.Errorf("execution %d found something in its network namespace: %q", i, got)
		}
		reused = field(got, "netns") == ns
	}
	if !reused {
		t.Fatalf("no later execution ran in the first one's network namespace %s: it was not reused", ns)
	}

	m, err := netns.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h, err := m.Acquire(netns.Key{Principal: "uid:65534", Workspace: f.ws})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	left, _ = run(h, "leave", name, port)
	if !strings.HasPrefix(left, "left ") || field(left, "sockets") == "0" {
		t.Fatalf("the execution on the workspace loopback did not leave its sockets behind: %q", left)
	}
	gone("workspace loopback", field(left, "pid"))
	got, _ := run(h, "netstate", name, port)
	if field(got, "netns") != field(left, "netns") || field(got, "sockets") != "0" || field(got, "abstract") != "no" || field(got, "tcp") != "no" {
		t.Errorf("the next execution on the workspace loopback %s found: %q", field(left, "netns"), got)
	}
}
