package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Invariant 12 against a real termd (as root, sandbox required): a command
// run for root without a person's approval holds no host root. Root's
// private files, the credential store and /etc/shadow stay unreadable even
// where the sandbox lets it read, root-only sockets refuse it, and what it
// writes in the workspace is still root's.

// rootSecrets makes a world-searchable directory outside the workspace
// holding what only host root may read or reach: a 0600 file, a
// credentials_file and a 0600 listening unix socket.
type rootSecrets struct {
	dir, secret, creds, sock string
}

const (
	rootSecretText = "root-only-secret-7f3a"
	credSecretText = "cred-store-secret-91bc"
)

func makeRootSecrets(t *testing.T) rootSecrets {
	t.Helper()
	dir, err := os.MkdirTemp("", "termd-rootsecrets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := rootSecrets{dir: dir, secret: filepath.Join(dir, "secret"), creds: filepath.Join(dir, "credentials"), sock: filepath.Join(dir, "root.sock")}
	if err := os.WriteFile(s.secret, []byte(rootSecretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.creds, []byte("PROBE_TOKEN="+credSecretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", s.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Chmod(s.sock, 0o600); err != nil {
		t.Fatal(err)
	}
	go acceptAndClose(ln)
	return s
}

// acceptAndClose accepts connections and closes each, until ln is closed.
func acceptAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// rootSecretsDaemon starts termd (sandbox required) with the probe allowed,
// the secrets' directory in the sandbox's system read set (as /etc is), and
// the credential store there.
func rootSecretsDaemon(t *testing.T, s rootSecrets, extraConfig string) *harness.Daemon {
	t.Helper()
	dir := probeBin(t)
	pol := strings.Replace(testPolicy("  - {id: test.probe, program: probe, decision: allow, risk: low, reason: \"test: sandbox probe\"}"),
		"trusted_path: [", "trusted_path: ["+dir+", ", 1)
	pol = strings.Replace(pol, "system_read: [", "system_read: ["+s.dir+", ", 1)
	cfg := "sandbox: required\ncredentials_file: " + s.creds + "\ncredentials:\n  - {name: PROBE_TOKEN}\n" + extraConfig
	return harness.Start(t, harness.Options{Config: cfg, Policy: pol})
}

// unapprovedProbe runs the probe as project code that needs no approval
// (workspace-write, offline, confirm mode) and fails if it was asked.
func unapprovedProbe(t *testing.T, d *harness.Daemon, args ...string) (string, map[string]any) {
	t.Helper()
	out, p, rec := probeRun(t, d, &termdv1.CommandRequest{Argv: append([]string{"probe"}, args...), Sandbox: "workspace-write"})
	if p.Decision.Verdict != termdv1.Verdict_VERDICT_ALLOW || p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("probe %v should run without approval: %v %v", args, p.Decision.Verdict, p.Decision.Reasons)
	}
	return out, rec
}

func TestRootRunHoldsNoHostRoot(t *testing.T) {
	requireSandbox(t)
	s := makeRootSecrets(t)
	d := rootSecretsDaemon(t, s, "")

	for _, c := range []struct{ what, path string }{
		{"a root 0600 file outside the workspace", s.secret},
		{"the credentials_file", s.creds},
		{"/etc/shadow", "/etc/shadow"},
		{"/etc/gshadow", "/etc/gshadow"},
	} {
		if _, err := os.Stat(c.path); err != nil {
			continue
		}
		out, _ := unapprovedProbe(t, d, "cat", c.path)
		if strings.Contains(out, rootSecretText) || strings.Contains(out, credSecretText) || strings.HasPrefix(out, "read") && !strings.HasPrefix(out, "read 0 bytes") {
			t.Errorf("a command run for root read %s: %q", c.what, out)
		}
	}
	out, _ := unapprovedProbe(t, d, "dial", s.sock)
	wantPrefix(t, out, "denied", "a command run for root connects to a root-only (0600) unix socket")

	// Inside its namespace it is root, and what it makes in the workspace
	// is root's on the disk, as before.
	out, rec := unapprovedProbe(t, d, "whoami")
	wantPrefix(t, out, "uid=0 gid=0", "the command's identity inside")
	made := filepath.Join(d.Workspace, "made-by-root")
	out, _ = unapprovedProbe(t, d, "write", made)
	wantPrefix(t, out, "ok", "a command run for root writes the workspace")
	if st, err := os.Stat(made); err != nil {
		t.Errorf("the file it wrote: %v", err)
	} else if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 0 || sys.Gid != 0 {
		t.Errorf("the file a command run for root wrote in the workspace is owned by %d:%d on the host, want 0:0", sys.Uid, sys.Gid)
	}
	// A root 0600 file in the workspace is still its own.
	own := filepath.Join(d.Workspace, "root-own")
	if err := os.WriteFile(own, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = unapprovedProbe(t, d, "cat", own)
	wantPrefix(t, out, "read 5 bytes: mine", "a command run for root reads root's file in the workspace")
	out, _ = unapprovedProbe(t, d, "owner", own)
	wantPrefix(t, out, "uid=0 gid=0", "root's file in the workspace, seen from inside")
	if ra, _ := rec["run_as"].(map[string]any); ra["uid"] != float64(0) || ra["host_uid"] != float64(65533) || rec["privileged"] != nil {
		t.Errorf("the receipt of a command run for root: run_as %v, want uid 0 on host uid 65533, not privileged", ra)
	}
}

// A plan marked privileged runs as real host root: always asked (trusted
// mode and all), and even then the credential store, /etc/shadow and the
// other host secrets are covered in its mount namespace.
func TestPrivilegedPlanAskedRunsAsRealRoot(t *testing.T) {
	requireSandbox(t)
	s := makeRootSecrets(t)
	d := rootSecretsDaemon(t, s, "")
	plan := func(args ...string) *termdv1.Plan {
		t.Helper()
		resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{
			Argv: append([]string{"probe"}, args...), Cwd: d.Workspace, Sandbox: "workspace-write", Mode: termdv1.Mode_MODE_TRUSTED, Privileged: true}})
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Plan
		if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || !p.Decision.GetPrivileged() || !strings.Contains(strings.Join(p.Decision.Reasons, "\n"), "privileged") {
			t.Fatalf("a privileged plan in trusted mode: %v privileged=%v %v; want it awaiting approval", p.State, p.Decision.GetPrivileged(), p.Decision.Reasons)
		}
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) (string, map[string]any) {
		t.Helper()
		_, rec, stdout, stderr := runToEnd(t, d.Client, plan(args...))
		return strings.TrimSpace(stdout + stderr), receiptJSON(t, d.Client, rec.Id)
	}
	out, rec := run("dial", s.sock)
	wantPrefix(t, out, "ok", "a privileged run connects to a root-only socket")
	if ra, _ := rec["run_as"].(map[string]any); rec["privileged"] != true || ra["uid"] != float64(0) || ra["host_uid"] != nil {
		t.Errorf("the receipt of a privileged run: privileged %v, run_as %v; want privileged, uid 0 and no host_uid", rec["privileged"], ra)
	}
	out, _ = run("cat", s.secret)
	wantPrefix(t, out, "read 22 bytes: "+rootSecretText, "a privileged run reads root's 0600 file")
	// termctl plan --privileged shows it, and so does the approval view.
	out, errOut, code := d.Run("termctl", "plan", "--privileged", "--mode", "trusted", "--cwd", d.Workspace, "--", "probe", "whoami")
	pend, _, _ := d.Run("termctl", "pending")
	if code != 0 || !strings.Contains(out, "privileged:") || !strings.Contains(out, "real host root") || !strings.Contains(pend, "privileged:") {
		t.Errorf("termctl plan --privileged (exit %d):\n%s%s\ntermctl pending:\n%s", code, out, errOut, pend)
	}
	// Covered by /dev/null on a nodev mount: opening it is refused.
	for _, p := range []string{s.creds, "/etc/shadow"} {
		out, _ = run("cat", p)
		wantPrefix(t, out, "denied", "a privileged run reads "+p+" (covered in its mount namespace)")
	}
}
