package receiptstore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/termd/termd/receipt"
)

func intp(i int) *int { return &i }

// sampleReceipt builds a realistic, schema-valid draft for a status.
func sampleReceipt(k *Keys, st receipt.Status, session string) *receipt.Receipt {
	start := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	cmd := "git status --short"
	uid := 1000
	r := &receipt.Receipt{
		PlanID:       "plan-" + string(st),
		SessionID:    session,
		ExecutionID:  "exec-" + string(st) + "-" + session,
		RequestHash:  "4b227777d4dd1fc61c6f884f48641d02b4d121d3fd328cb08b5531fcacdabf8a",
		Requester:    receipt.Principal{Kind: "unix", ID: "uid:1000", Role: "agent", UID: &uid},
		Command:      cmd,
		BinaryPath:   "/usr/bin/git",
		BinarySHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Cwd:          "/home/dev/project",
		RunAs:        &receipt.RunAs{User: "dev", UID: 1000, GID: 1000},
		Mode:         "confirm",
		Risk:         "low",
		Decision:     string(receipt.DecisionAllow),
		Policy: receipt.Policy{
			Allowed: true, Risk: "low", Reasons: []string{"read-only git subcommand"},
			Argv: []string{"git", "status", "--short"}, Version: "builtin-1", RuleIDs: []string{"git.read"},
		},
		Limits:      receipt.Limits{TimeoutMs: 30000, MaxOutputBytes: 1 << 20},
		Status:      st,
		StartedAt:   start,
		FinishedAt:  start.Add(42 * time.Millisecond),
		DurationMs:  42,
		Stdout:      " M main.go\n",
		StdoutBytes: 11,
	}
	if k != nil {
		r.CommandSHA256 = k.Digest([]byte(cmd))
		r.StdoutDigest = k.Digest([]byte(r.Stdout))
		r.StderrDigest = k.Digest(nil)
	} else {
		r.CommandSHA256 = "0000000000000000000000000000000000000000000000000000000000000001"
	}
	switch st {
	case receipt.StatusSucceeded:
		r.ExitCode = intp(0)
	case receipt.StatusFailed:
		r.ExitCode = intp(2)
		r.Stderr = "fatal: not a git repository\n"
		r.StderrBytes = int64(len(r.Stderr))
	case receipt.StatusTimedOut, receipt.StatusKilled:
		r.Signal = "SIGKILL"
		r.Detail = "process group killed"
	case receipt.StatusCancelled:
		r.Signal = "SIGTERM"
		r.Approved = true
		r.Decision = string(receipt.DecisionAsk)
		r.Policy.RequiresApproval = true
		r.Approver = &receipt.Principal{Kind: "unix", ID: "uid:1001", Role: "operator"}
	case receipt.StatusDenied:
		r.Decision = string(receipt.DecisionDeny)
		r.Policy.Allowed = false
		r.Risk, r.Policy.Risk = "critical", "critical"
		r.Policy.Reasons = []string{"rm -rf outside workspace"}
		r.Policy.RuleIDs = []string{"fs.rm.outside"}
	case receipt.StatusBlocked, receipt.StatusExpired:
		r.Decision = string(receipt.DecisionAsk)
		r.Policy.RequiresApproval = true
	case receipt.StatusOutcomeUnknown:
		r.Detail = "daemon restarted"
	}
	if !st.Ran() {
		r.DurationMs = 0
		r.FinishedAt = r.StartedAt
		r.Stdout, r.StdoutBytes = "", 0
		if k != nil {
			r.StdoutDigest = ""
			r.StderrDigest = ""
		}
		r.RunAs = nil
	}
	return r
}

func newKeys(t testing.TB) *Keys {
	t.Helper()
	k, err := LoadOrCreateKeys(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newStore(t testing.TB) (*Store, *Keys, string) {
	t.Helper()
	dir := t.TempDir()
	k, err := LoadOrCreateKeys(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "receipts.db")
	s, err := Open(path, k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, k, path
}

// reopenStore closes s and opens the store at path again, as termd's next
// start does.
func reopenStore(t testing.TB, s *Store, path string, k *Keys) *Store {
	t.Helper()
	s.Close()
	s2, err := Open(path, k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}
