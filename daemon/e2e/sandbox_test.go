package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// The sandbox issue's "Done when", against a real termd: each test runs the
// same plans with the sandbox switched off as its control, so it fails when
// the kernel stops enforcing.

var (
	probeOnce sync.Once
	probeDir  string
	probeErr  error
)

// probeBin builds the sandbox probe (daemon/sandbox/testdata/probe) into a
// root-owned directory that the test policy adds to the trusted PATH.
func probeBin(t *testing.T) string {
	t.Helper()
	probeOnce.Do(func() {
		probeDir, probeErr = os.MkdirTemp("", "termd-probe-")
		if probeErr != nil {
			return
		}
		_ = os.Chmod(probeDir, 0o755)
		cmd := exec.Command("go", "build", "-o", probeDir+"/probe", "./daemon/sandbox/testdata/probe")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeErr = fmt.Errorf("building the probe: %v\n%s", err, out)
		}
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	return probeDir
}

// requireSandbox fails (under make test) or skips (a focused go test run)
// where the kernel lacks what the sandbox needs.
func requireSandbox(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); e != 0 || abi < 6 {
		msg := fmt.Sprintf("this kernel has no Landlock ABI 6 (got %d, %v): the sandbox cannot be enforced", abi, e)
		if os.Getenv("TERMD_REQUIRE_SANDBOX") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; set TERMD_REQUIRE_SANDBOX=1 to make this a failure")
	}
}

// sandboxDaemon starts termd with the probe allowed and the sandbox set to mode.
func sandboxDaemon(t *testing.T, mode string) *harness.Daemon {
	dir := probeBin(t)
	pol := strings.Replace(testPolicy("  - {id: test.probe, program: probe, decision: allow, risk: low, reason: \"test: sandbox probe\"}"),
		"trusted_path: [", "trusted_path: ["+dir+", ", 1)
	return harness.Start(t, harness.Options{Config: "sandbox: " + mode + "\n", Policy: pol})
}

// probeRun plans the probe (approving when asked) and returns its output,
// its plan and its receipt.
func probeRun(t *testing.T, d *harness.Daemon, req *termdv1.CommandRequest) (string, *termdv1.Plan, map[string]any) {
	t.Helper()
	req.Cwd = d.Workspace
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: req})
	if err != nil {
		t.Fatalf("plan %q: %v", req.Argv, err)
	}
	p := resp.Plan
	if p.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	} else if p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("plan %q: %v %v", req.Argv, p.State, p.Decision.Reasons)
	}
	_, rec, stdout, stderr := runToEnd(t, d.Client, p)
	return strings.TrimSpace(stdout + stderr), p, receiptJSON(t, d.Client, rec.Id)
}

func probeArgv(args ...string) *termdv1.CommandRequest {
	return &termdv1.CommandRequest{Argv: append([]string{"probe"}, args...)}
}

func wantPrefix(t *testing.T, got, prefix, what string) {
	t.Helper()
	if !strings.HasPrefix(got, prefix) {
		t.Errorf("%s: got %q, want %q…", what, got, prefix)
	}
}

func TestSandboxReadOnlyPlan(t *testing.T) {
	requireSandbox(t)
	d := sandboxDaemon(t, "required")
	target := filepath.Join(d.Workspace, "written-by-read-only")
	out, p, rec := probeRun(t, d, probeArgv("write", target))
	wantPrefix(t, out, "denied: permission denied", "a read-only plan writes a file")
	if _, err := os.Stat(target); err == nil {
		t.Error("the read-only plan created the file")
	}
	if p.State != termdv1.PlanState_PLAN_STATE_PLANNED || p.Decision.Verdict != termdv1.Verdict_VERDICT_ALLOW {
		t.Errorf("a program without a grammar should run read-only without approval in confirm mode: %v %v", p.Decision.Verdict, p.Decision.Reasons)
	}
	if got := p.Decision.GetSandbox(); got.GetProfile() != "read-only" || got.GetEnforcement() != "full" {
		t.Errorf("plan sandbox %+v, want read-only, full", got)
	}
	sb, _ := rec["sandbox"].(map[string]any)
	if rec["schema_version"] != receipt.SchemaVersion || sb["profile"] != "read-only" || sb["level"] != "full" || sb["seccomp"] != true || sb["landlock_abi"] == nil {
		t.Errorf("receipt: schema %v, sandbox %v", rec["schema_version"], sb)
	}
	out, _, _ = probeRun(t, d, probeArgv("exec", "/bin/sh"))
	wantPrefix(t, out, "denied: permission denied", "a read-only plan execs /bin/sh")

	// Asking for workspace-write lets it write (project code: confined,
	// offline, so still no approval with the sandbox enforced).
	out, p, _ = probeRun(t, d, &termdv1.CommandRequest{Argv: []string{"probe", "write", target}, Sandbox: "workspace-write"})
	wantPrefix(t, out, "ok", "a workspace-write plan writes the workspace")
	if p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Error("confined offline project code should not need approval")
	}

	// Control: with the sandbox off the same program asks, and writes.
	off := sandboxDaemon(t, "off")
	target = filepath.Join(off.Workspace, "written")
	out, p, rec = probeRun(t, off, probeArgv("write", target))
	wantPrefix(t, out, "ok", "without the sandbox")
	if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Error("without the sandbox a program without a grammar needs approval")
	}
	if sb, _ := rec["sandbox"].(map[string]any); sb["level"] != "none" || sb["mode"] != "off" {
		t.Errorf("receipt without the sandbox: %v", sb)
	}
	out, _, _ = probeRun(t, off, probeArgv("exec", "/bin/sh"))
	wantPrefix(t, out, "executed", "without the sandbox exec works")
}

func TestSandboxProtectsHooksAndTermdFiles(t *testing.T) {
	requireSandbox(t)
	for _, mode := range []string{"required", "off"} {
		t.Run(mode, func(t *testing.T) {
			d := sandboxDaemon(t, mode)
			for _, dir := range []string{".git/hooks", ".termd"} {
				if err := os.MkdirAll(filepath.Join(d.Workspace, dir), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			enforced := mode == "required"
			for _, f := range []string{".git/hooks/x", ".termd/policy.yaml"} {
				out, _, _ := probeRun(t, d, &termdv1.CommandRequest{Argv: []string{"probe", "write", filepath.Join(d.Workspace, f)}, Sandbox: "workspace-write"})
				if enforced {
					wantPrefix(t, out, "denied: read-only file system", "workspace-write writes "+f)
				} else {
					wantPrefix(t, out, "ok", "unconfined writes "+f)
				}
			}
			// termd's own key and receipt database, even in trusted mode as root.
			keys, _ := filepath.Glob(filepath.Join(d.StateDir, "keys", "*.key"))
			if len(keys) == 0 {
				t.Fatal("no key files in the state directory")
			}
			for _, f := range append(keys, filepath.Join(d.StateDir, "receipts.db")) {
				out, _, _ := probeRun(t, d, &termdv1.CommandRequest{Argv: []string{"probe", "read", f}, Mode: termdv1.Mode_MODE_TRUSTED, Sandbox: "workspace-write"})
				if enforced {
					wantPrefix(t, out, "denied: permission denied", "trusted root plan reads "+f)
				} else {
					wantPrefix(t, out, "ok", "unconfined reads "+f)
				}
			}
		})
	}
}

func TestSandboxNetworkSignalsPtraceAndRoot(t *testing.T) {
	requireSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptAndClose(ln)
	outsider := exec.Command("sleep", "60")
	if err := outsider.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outsider.Process.Kill(); _ = outsider.Wait() }()
	pid := strconv.Itoa(outsider.Process.Pid)
	for _, mode := range []string{"required", "off"} {
		t.Run(mode, func(t *testing.T) {
			d := sandboxDaemon(t, mode)
			locked := filepath.Join(d.Workspace, "locked")
			if err := os.WriteFile(locked, []byte("x"), 0o000); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(locked, 12345, 12345); err != nil {
				t.Fatal(err)
			}
			cases := []struct{ what, on, off string }{
				// Offline plans run on their workspace loopback with or
				// without the sandbox: the host's loopback is not there (the
				// sandbox's own TCP rules, under network none, are tested
				// alone in daemon/sandbox and in network_test.go).
				{"connect " + ln.Addr().String(), "error: connection refused", "error: connection refused"},
				{"kill " + pid, "denied", "ok"},
				{"ptrace " + pid, "denied", "ok"},
				{"settime", "denied", "ok"},
				{"module", "denied", "error"}, // unconfined root reaches the kernel's module loader
				{"read " + locked, "denied", "ok"},
			}
			for _, c := range cases {
				out, _, _ := probeRun(t, d, &termdv1.CommandRequest{Argv: append([]string{"probe"}, strings.Fields(c.what)...), Mode: termdv1.Mode_MODE_TRUSTED, Sandbox: "workspace-write"})
				want := c.off
				if mode == "required" {
					want = c.on
				}
				wantPrefix(t, out, want, "probe "+c.what)
			}
		})
	}
}

// The attack of the sandbox issue: the workspace's owner loops
// renameat2(RENAME_EXCHANGE) between a workspace directory and a symbolic
// link to a root-only directory outside while an operator's approved
// `touch sub/FILE` runs again and again. Without the sandbox writes land
// outside (checked below as the control); with it none do.
func TestSandboxSymlinkExchangeRace(t *testing.T) {
	requireSandbox(t)
	escaped := func(mode string, runs int) (int, int) {
		d := sandboxDaemon(t, mode)
		outside := filepath.Join(d.Dir, "root-only")
		if err := os.Mkdir(outside, 0o700); err != nil {
			t.Fatal(err)
		}
		sub, link := filepath.Join(d.Workspace, "sub"), filepath.Join(d.Workspace, "link")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, link); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !stop.Load() {
				_ = unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
			}
		}()
		failed := 0
		for i := 0; i < runs; i++ {
			resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{
				Argv: []string{"touch", fmt.Sprintf("sub/FILE%d", i)}, Cwd: d.Workspace, Mode: termdv1.Mode_MODE_TRUSTED}})
			if err != nil || resp.Plan.State != termdv1.PlanState_PLAN_STATE_PLANNED {
				continue // the policy saw the link at plan time
			}
			if ex, _, _, _ := runStale(t, d.Client, resp.Plan); ex == nil || ex.ExitCode != 0 {
				failed++
			}
		}
		stop.Store(true)
		<-done
		ents, _ := os.ReadDir(outside)
		return len(ents), failed
	}
	n, failed := escaped("required", 40)
	if n > 0 {
		t.Fatalf("with the sandbox, %d approved writes landed outside the workspace", n)
	}
	t.Logf("with the sandbox: 0 escaped, %d of 40 runs failed (EACCES when the link was in place)", failed)
	if n, _ := escaped("off", 40); n == 0 {
		t.Log("control: no write escaped without the sandbox this time (the race is timing-dependent)")
	} else {
		t.Logf("control: without the sandbox %d writes landed outside", n)
	}
}

// runStale executes a plan that may be refused as stale (the race moved
// things between plan and execute): nil execution then.
func runStale(t *testing.T, c *client.Client, p *termdv1.Plan) (*termdv1.Execution, *termdv1.ReceiptSummary, string, string) {
	st, err := c.Executions.ExecuteAndWait(ctxT(t), &termdv1.ExecuteAndWaitRequest{PlanId: p.Id})
	if err != nil {
		return nil, nil, "", ""
	}
	var ex *termdv1.Execution
	for {
		m, err := st.Recv()
		if err != nil {
			return ex, nil, "", ""
		}
		if m.Event.Kind == termdv1.EventKind_EVENT_KIND_FINISHED {
			ex = m.Event.GetExecution()
		}
	}
}

// An agent that edits and tests Go code does not wait for a person: go test
// and make of a sample project run in confirm mode without approval inside
// the workspace-write sandbox, with a working build cache; with the sandbox
// off the same plans ask.
func TestSandboxProjectCodeWithoutApproval(t *testing.T) {
	requireSandbox(t)
	if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
		t.Fatalf("this test runs the Go toolchain at /usr/local/go/bin/go (in the default trusted PATH): %v", err)
	}
	sample := map[string]string{
		"go.mod":       "module example.com/sample\n\ngo 1.21\n",
		"main.go":      "package main\n\nimport \"fmt\"\n\nfunc Add(a, b int) int { return a + b }\n\nfunc main() { fmt.Println(Add(2, 3)) }\n",
		"main_test.go": "package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n",
		"Makefile":     "all:\n\tgo build -o bin/sample .\n\t./bin/sample\n",
	}
	for _, mode := range []string{"required", "off"} {
		t.Run(mode, func(t *testing.T) {
			d := sandboxDaemon(t, mode)
			for name, body := range sample {
				if err := os.WriteFile(filepath.Join(d.Workspace, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// go vet is read-only inspection: it runs in the read-only profile
			// and still needs the toolchain's vet tool and the build cache.
			profiles := []string{"workspace-write", "workspace-write", "workspace-write", "read-only"}
			for i, argv := range [][]string{{"go", "test", "./..."}, {"go", "test", "./..."}, {"make"}, {"go", "vet", "./..."}} {
				resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: argv, Cwd: d.Workspace, TimeoutSeconds: 900}})
				if err != nil {
					t.Fatal(err)
				}
				p := resp.Plan
				if mode == "off" && profiles[i] != "read-only" {
					if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
						t.Errorf("%q without the sandbox: %v, want awaiting approval", argv, p.State)
					}
					continue
				}
				if p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
					t.Fatalf("%q with the sandbox: %v %v, want planned (no approval)", argv, p.State, p.Decision.Reasons)
				}
				ex, rec, stdout, stderr := runToEndWithin(t, d.Client, p, 15*time.Minute)
				if ex.ExitCode != 0 {
					t.Fatalf("%q: exit %d\n%s%s", argv, ex.ExitCode, stdout, stderr)
				}
				switch i {
				case 0:
					if !strings.Contains(stdout, "ok") {
						t.Errorf("go test: %q", stdout)
					}
				case 1:
					if !strings.Contains(stdout, "(cached)") {
						t.Errorf("the second go test should come from the build cache: %q", stdout)
					}
				case 2:
					if strings.TrimSpace(lastLine(stdout)) != "5" {
						t.Errorf("make: %q", stdout)
					}
				}
				if mode == "off" {
					continue
				}
				if sb, _ := receiptJSON(t, d.Client, rec.Id)["sandbox"].(map[string]any); sb["profile"] != profiles[i] || sb["level"] != "full" {
					t.Errorf("%q receipt sandbox: %v", argv, sb)
				}
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Known gaps of the grammar (docs/POLICY.md) that the kernel now closes:
// each runs with the sandbox required and off, and only the latter leaks.
func TestSandboxClosesGrammarGaps(t *testing.T) {
	requireSandbox(t)
	for _, mode := range []string{"required", "off"} {
		t.Run(mode, func(t *testing.T) {
			d := sandboxDaemon(t, mode)
			secretDir := filepath.Join(d.Dir, "root-only")
			if err := os.Mkdir(secretDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(secretDir, "secret.txt"), []byte("TOPSECRET-42\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			ws := d.Workspace
			leaks := mode == "off"
			run := func(argv ...string) string {
				t.Helper()
				out, _, _ := probeRun(t, d, &termdv1.CommandRequest{Argv: argv, Mode: termdv1.Mode_MODE_TRUSTED})
				return out
			}

			// 1. A recursive read follows a link planted inside the tree.
			if err := os.Symlink(secretDir, filepath.Join(ws, "planted")); err != nil {
				t.Fatal(err)
			}
			out := run("grep", "-rR", "TOPSECRET", ".")
			if strings.Contains(out, "TOPSECRET-42") != leaks {
				t.Errorf("grep -rR through a planted link (leak expected %t): %q", leaks, out)
			}
			os.Remove(filepath.Join(ws, "planted"))

			// 2. What a Makefile's recipes (and includes) read is not checked.
			mk := "all:\n\tcat " + filepath.Join(secretDir, "secret.txt") + "\n"
			if err := os.WriteFile(filepath.Join(ws, "Makefile"), []byte(mk), 0o644); err != nil {
				t.Fatal(err)
			}
			out = run("make")
			if strings.Contains(out, "TOPSECRET-42") != leaks {
				t.Errorf("a Makefile recipe reads outside (leak expected %t): %q", leaks, out)
			}

			// 3. A repository's clean filter (a driver in .git/config) runs
			// when git add uses it, and writes outside the workspace.
			pwned := filepath.Join(secretDir, "pwned")
			repo := filepath.Join(ws, "repo")
			for _, c := range [][]string{{"init", "-q", repo}, {"-C", repo, "config", "filter.x.clean", "touch " + pwned + "; cat"}} {
				if o, err := exec.Command("git", c...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v %s", c, err, o)
				}
			}
			if err := os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("*.txt filter=x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{
				Argv: []string{"git", "add", "a.txt"}, Cwd: repo, Mode: termdv1.Mode_MODE_TRUSTED}})
			if err != nil || resp.Plan.State != termdv1.PlanState_PLAN_STATE_PLANNED {
				t.Fatalf("git add: %v %v", err, resp.GetPlan().GetDecision().GetReasons())
			}
			runToEnd(t, d.Client, resp.Plan)
			if _, err := os.Stat(pwned); (err == nil) != leaks {
				t.Errorf("a clean filter wrote outside the workspace: %t (expected %t)", err == nil, leaks)
			}
		})
	}
}

// A program that is a #!/usr/bin/env script (npm: #!/usr/bin/env node) runs
// in the read-only sandbox: what env runs is allowed to execute too
// (it failed with "/usr/bin/env: 'node': Permission denied").
func TestSandboxRunsEnvScripts(t *testing.T) {
	requireSandbox(t)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("this test runs npm (a #!/usr/bin/env node script; scripts/ci-deps.sh installs it): %v", err)
	}
	d := sandboxDaemon(t, "required")
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{npm, "ls"}, Cwd: d.Workspace, Sandbox: "read-only"}})
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Plan
	if p.State != termdv1.PlanState_PLAN_STATE_PLANNED && p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("npm ls: %v %v", p.State, p.Decision.Reasons)
	}
	if p.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	}
	ex, _, stdout, stderr := runToEndWithin(t, d.Client, p, 2*time.Minute)
	if ex.ExitCode != 0 || !strings.Contains(stdout, "(empty)") || strings.Contains(stderr, "Permission denied") {
		t.Fatalf("npm ls in the read-only sandbox: exit %d\n%s%s", ex.ExitCode, stdout, stderr)
	}
}

// termd holds the private mount namespace of a command (a plan with
// read-only paths) until its receipt is committed, so the command's exit is
// not held up by the namespace's teardown; after many executions it holds
// none of them, and no more descriptors than after the first.
func TestSandboxMountNamespacesNotLeaked(t *testing.T) {
	requireSandbox(t)
	d := sandboxDaemon(t, "required")
	if err := os.MkdirAll(filepath.Join(d.Workspace, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	fds := func() (all int, mnt map[string]bool) {
		mnt = map[string]bool{}
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.Pid()))
		for _, e := range ents {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", d.Pid(), e.Name())); err == nil && strings.HasPrefix(l, "mnt:[") {
				mnt[l] = true
			}
		}
		return len(ents), mnt
	}
	own, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", d.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	run := func() string {
		t.Helper()
		out, _, _ := probeRun(t, d, &termdv1.CommandRequest{Argv: []string{"probe", "mntns"}, Sandbox: "workspace-write"})
		if !strings.HasPrefix(out, "mnt:[") || out == own {
			t.Fatalf("the command's mount namespace: %q (termd's: %s)", out, own)
		}
		return out
	}
	// settled waits until termd holds none of ns and its descriptor count
	// stays put (the spawn pools refill after each execution).
	settled := func(ns []string) (int, map[string]bool) {
		var all int
		var mnt map[string]bool
		prev := -1
		waitFor(t, func() bool {
			time.Sleep(200 * time.Millisecond)
			all, mnt = fds()
			for _, n := range ns {
				if mnt[n] {
					return false
				}
			}
			stable := all == prev
			prev = all
			return stable
		}, "termd to let its commands' mount namespaces go")
		return all, mnt
	}
	var seen []string
	for range 6 { // the first names the launcher: the pool fills
		seen = append(seen, run())
	}
	first, _ := settled(seen)
	for range 12 {
		seen = append(seen, run())
	}
	after, mnt := settled(seen)
	if len(mnt) != 0 {
		t.Errorf("termd still holds mount namespaces %v", mnt)
	}
	if after > first+2 {
		// The spawn pools hold a bounded number of descriptors (recycled
		// network namespaces and cgroups, pre-started launchers), and how
		// many they hold at a quiet moment depends on timing: a leak is
		// what keeps growing with more executions.
		for range 12 {
			seen = append(seen, run())
		}
		if again, _ := settled(seen); again > after+2 {
			t.Errorf("termd held %d descriptors after 6 executions, %d after 12 more, %d after 12 more again", first, after, again)
		}
	}
}
