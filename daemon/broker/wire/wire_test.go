package wire

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Every policy word has its API enum, and a mode survives the round trip;
// an unset mode is refused with the modes named.
func TestEnumsMatchThePolicyWords(t *testing.T) {
	for _, m := range []policy.Mode{policy.ModeInspect, policy.ModeConfirm, policy.ModeTrusted} {
		p := ModeProto(m)
		if p == termdv1.Mode_MODE_UNSPECIFIED {
			t.Errorf("mode %q has no API enum", m)
		}
		if back, err := ModeFromProto(p); err != nil || back != m {
			t.Errorf("ModeFromProto(%v) = %q, %v, want %q", p, back, err, m)
		}
	}
	if _, err := ModeFromProto(termdv1.Mode_MODE_UNSPECIFIED); err == nil || !strings.Contains(err.Error(), "inspect, confirm, trusted") {
		t.Errorf("ModeFromProto(UNSPECIFIED) = %v, want an error naming the modes", err)
	}
	for _, v := range []policy.Verdict{policy.Allow, policy.Ask, policy.Deny} {
		if VerdictProto(v) == termdv1.Verdict_VERDICT_UNSPECIFIED {
			t.Errorf("verdict %q has no API enum", v)
		}
	}
	for _, r := range []policy.Risk{policy.RiskLow, policy.RiskMedium, policy.RiskHigh, policy.RiskCritical} {
		if RiskProto(r) == termdv1.Risk_RISK_UNSPECIFIED {
			t.Errorf("risk %q has no API enum", r)
		}
	}
}

// The preview says in a line what the command would do.
func TestPreviewSummaries(t *testing.T) {
	writes := []string{"/w/1", "/w/2", "/w/3", "/w/4", "/w/5", "/w/6", "/w/7"}
	cases := []struct {
		name string
		d    policy.Decision
		want string
	}{
		{"denied", policy.Decision{Verdict: policy.Deny, Argv: []string{"rm"}}, "rm: will not run"},
		{"read-only", policy.Decision{Verdict: policy.Allow, ResolvedPath: "/usr/bin/ls", ReadOnly: true, Timeout: time.Minute},
			"ls: reads only; times out after 1m0s; sandbox "},
		{"writes", policy.Decision{Verdict: policy.Ask, ResolvedPath: "/usr/bin/go", Writes: writes, RunsProjectCode: true, Network: true, Timeout: time.Second},
			"go: may write /w/1, /w/2, /w/3, /w/4, /w/5, and 2 more; runs project code; uses the network; times out after 1s; sandbox "},
		{"no program", policy.Decision{Verdict: policy.Deny}, "the command: will not run"},
	}
	for _, c := range cases {
		if got := PreviewOf(c.d).Summary; got != c.want {
			t.Errorf("%s: summary %q, want %q", c.name, got, c.want)
		}
	}
	if len(writes) != 7 {
		t.Errorf("the preview changed the decision's writes: %q", writes)
	}
}

// Redaction replaces what a decision and a request show, never the values
// they share with the real request.
func TestRedactionLeavesTheRealRequest(t *testing.T) {
	const secret = "hunter2-very-secret"
	r := receiptstore.NewRedactor(secret)
	argv := []string{"curl", "-u", secret}
	env := map[string]string{"PASS": secret}
	d := policy.Decision{Argv: argv, Env: env, Steps: []policy.Step{{Name: "s", Detail: "uses " + secret}}}
	RedactDecision(r, &d)
	if slices.Contains(d.Argv, secret) || d.Env["PASS"] == secret || strings.Contains(d.Steps[0].Detail, secret) {
		t.Errorf("the redacted decision still shows the secret: %+v", d)
	}
	if argv[2] != secret || env["PASS"] != secret {
		t.Errorf("redacting the decision wrote into the request's argv %q or env %q", argv, env)
	}
	req := &termdv1.CommandRequest{Argv: argv, Env: map[string]string{"PASS": secret}, Stdin: []byte("in")}
	out := RedactRequest(r, req)
	if slices.Contains(out.Argv, secret) || out.Env["PASS"] == secret || out.Stdin != nil {
		t.Errorf("the redacted request %v still shows the secret or its stdin", out)
	}
	if req.Env["PASS"] != secret || req.Stdin == nil {
		t.Errorf("redacting the request changed it: %v", req)
	}
}

// A past execution is what its receipt says: its final state from the
// status word, its exit code and sandbox; a status naming no final state
// is OUTCOME_UNKNOWN.
func TestExecutionOfReceipt(t *testing.T) {
	code := 3
	r := &receipt.Receipt{ID: "r1", PlanID: "p1", SessionID: "s1", Status: receipt.StatusFailed, ExitCode: &code,
		StdoutBytes: 10, Detail: "exit 3", Sandbox: &receipt.Sandbox{NetworkNamespace: true}}
	e := ExecutionOfReceipt("e1", r)
	if e.Id != "e1" || e.PlanId != "p1" || e.SessionId != "s1" || e.ReceiptId != "r1" || e.ExitCode != 3 ||
		e.StdoutBytes != 10 || e.Error != "exit 3" || !e.NetworkIsolated || e.State != termdv1.ExecutionState_EXECUTION_STATE_FAILED {
		t.Errorf("execution %v does not tell receipt %+v", e, r)
	}
	r.Status = "no-such-status"
	if e := ExecutionOfReceipt("e1", r); e.State != termdv1.ExecutionState_EXECUTION_STATE_OUTCOME_UNKNOWN {
		t.Errorf("a status naming no final state gave %v, want OUTCOME_UNKNOWN", e.State)
	}
}
