package receiptq

import (
	"errors"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/runner"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// credentialOf looks an account up in the host's user database, as
// executions.CredentialFor does for a name or uid.
func credentialOf(who string) (*syscall.Credential, error) {
	u, err := user.LookupId(who)
	if err != nil {
		if u, err = user.Lookup(who); err != nil {
			return nil, err
		}
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func draftOf(rq *Receipts, plan *termdv1.Plan, req policy.Request, dec policy.Decision) Draft {
	return Draft{Plan: plan, SessionID: "s1", Request: req, Decision: dec,
		Limits: policy.Limits{OutputBytes: 1 << 20, MemoryBytes: 1 << 30, Pids: 64}, Digest: rq.Keys.Digest, Credential: credentialOf}
}

// A draft says what was asked, decided and approved, and who the command
// runs as; once finished it is a receipt the real store seals and verifies.
func TestDraftReceipt(t *testing.T) {
	rq := newReceipts(t)
	plan := &termdv1.Plan{Id: "p1", Requester: operator, GrantId: "g1", AdviceDigest: strings.Repeat("ef", 32),
		Approval: &termdv1.Approval{Approver: operator}}
	dec := policy.Decision{Verdict: policy.Ask, Risk: "medium", Mode: policy.ModeConfirm, Argv: []string{"echo", "a b"},
		RequestHash: strings.Repeat("ab", 32), ResolvedPath: "/bin/echo", BinarySHA256: strings.Repeat("cd", 32), Cwd: "/w",
		PolicyVersion: "v1", Timeout: 2 * time.Second, Stdin: &policy.Stdin{Bytes: 3, SHA256: rq.Keys.Digest([]byte("abc"))}}
	now := time.Now().Add(-time.Second)
	r := draftOf(rq, plan, policy.Request{Argv: []string{"echo", "a b"}}, dec).Receipt(now)
	if r.Command != "echo 'a b'" || r.CommandSHA256 != rq.Keys.Digest([]byte(r.Command)) || r.PlanID != "p1" || r.SessionID != "s1" {
		t.Errorf("command %q (%s), plan %s, session %s", r.Command, r.CommandSHA256, r.PlanID, r.SessionID)
	}
	if !r.Approved || r.Approver == nil || r.Approver.Name != "root" || r.GrantID != "g1" || !r.Policy.RequiresApproval || r.AdviceDigest != plan.AdviceDigest {
		t.Errorf("approval: %v %+v grant %q requires %v", r.Approved, r.Approver, r.GrantID, r.Policy.RequiresApproval)
	}
	if r.Stdin == nil || r.Stdin.Bytes != 3 || r.Limits.TimeoutMs != 2000 || r.Limits.MaxPids != 64 || !r.StartedAt.Equal(now) {
		t.Errorf("stdin %+v, limits %+v, started %v", r.Stdin, r.Limits, r.StartedAt)
	}
	if r.RunAs == nil || r.RunAs.User != "root" || r.RunAs.UID != 0 || r.RunAs.GID != 0 {
		t.Errorf("runs as %+v, want the requester root", r.RunAs)
	}
	off := false
	d := draftOf(rq, plan, policy.Request{Command: "ls | wc"}, policy.Decision{})
	d.RunAsRequester = &off
	if r := d.Receipt(now); r.Command != "ls | wc" || r.RunAs != nil {
		t.Errorf("a command string: %q, runs as %+v", r.Command, r.RunAs)
	}
	if r := draftOf(rq, plan, policy.Request{Command: "ls"}, policy.Decision{Argv: []string{"ls", "-l"}, RunAs: "root"}).Receipt(now); r.Command != "ls -l" || r.RunAs.User != "root" {
		t.Errorf("a split command string: %q, runs as %+v", r.Command, r.RunAs)
	}

	Finished(r, "e1", runner.Result{Status: runner.StatusSucceeded, StartedAt: now, FinishedAt: now.Add(time.Millisecond), Duration: time.Millisecond,
		Stdout: runner.StreamResult{Kept: []byte("a b\n"), Total: 4, Digest: rq.Keys.Digest([]byte("a b\n"))}, Stderr: runner.StreamResult{Digest: rq.Keys.Digest(nil)}}, "")
	stored, err := rq.Store.Append(r)
	if err != nil {
		t.Fatalf("the store refused the finished draft: %v", err)
	}
	if stored.ExecutionID != "e1" || *stored.ExitCode != 0 || stored.Stdout != "a b\n" {
		t.Errorf("stored %+v", stored)
	}
	if past, err := rq.OfExecution(alice, "e1"); past != nil || err != nil {
		t.Errorf("alice sees root's execution: %v, %v", past, err)
	}
	if past, err := rq.OfExecution(operator, "e1"); err != nil || past.ID != stored.ID {
		t.Errorf("the operator's own execution: %v, %v", past, err)
	}
	if past, err := rq.OfExecution(operator, "e2"); past != nil || err != nil {
		t.Errorf("no such execution: %v, %v", past, err)
	}
}

// How an execution ended: a spawn failure is exit 127, a signal has no exit
// code, binary output is not copied; a denial names who denied it.
func TestFinishedAndDecided(t *testing.T) {
	r := &receipt.Receipt{}
	Finished(r, "e1", runner.Result{Status: runner.StatusFailed, Err: errors.New("no such file"), ExitCode: -1}, "spawn failed")
	if r.ExitCode == nil || *r.ExitCode != 127 || r.Status != "failed" || r.Detail != "spawn failed" {
		t.Errorf("spawn failure: exit %v, status %s, detail %q", r.ExitCode, r.Status, r.Detail)
	}
	r = &receipt.Receipt{}
	Finished(r, "e1", runner.Result{Status: runner.StatusKilled, Signal: "SIGKILL", ExitCode: -1,
		Stdout: runner.StreamResult{Kept: []byte("a\x00b"), Total: 9, Truncated: true}, Stderr: runner.StreamResult{Kept: []byte{0xff}, Total: 1}}, "")
	if r.ExitCode != nil || r.Signal != "SIGKILL" || !r.OutputTruncated || !r.StdoutTruncated || r.StderrTruncated {
		t.Errorf("killed: exit %v, signal %s, truncated %v/%v/%v", r.ExitCode, r.Signal, r.OutputTruncated, r.StdoutTruncated, r.StderrTruncated)
	}
	if !strings.Contains(r.Stdout, "binary output not kept in the receipt: 9 bytes") || !strings.Contains(r.Stderr, "1 bytes") {
		t.Errorf("binary output kept as %q / %q", r.Stdout, r.Stderr)
	}
	r = &receipt.Receipt{Approved: true}
	Decided(r, "denied", operator, "denied by root: no")
	if r.Status != "denied" || r.Approved || r.Approver == nil || r.Approver.Name != "root" || r.Detail != "denied by root: no" {
		t.Errorf("denied: %+v", r)
	}
	r = &receipt.Receipt{}
	Decided(r, "expired", operator, "late")
	if r.Approver != nil || r.Status != "expired" {
		t.Errorf("expired: %+v", r)
	}
}

// The signing keys, the current one first, each in PEM.
func TestPublicKeys(t *testing.T) {
	rq := newReceipts(t)
	if err := rq.Keys.Rotate(); err != nil {
		t.Fatal(err)
	}
	out := rq.PublicKeys()
	if len(out.Keys) != 2 || !out.Keys[0].Current || out.Keys[0].KeyId != rq.Keys.KeyID() || out.Keys[1].Current {
		t.Fatalf("keys %v", out.Keys)
	}
	for _, k := range out.Keys {
		if !strings.Contains(k.Pem, "PUBLIC KEY") {
			t.Errorf("key %s: %q", k.KeyId, k.Pem)
		}
	}
}
