package wire

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// The policy's words and the API's enums share their names ("confirm" is
// MODE_CONFIRM), so conversions look the name up; an unknown word is the
// UNSPECIFIED zero value.
func enumOf(prefix, word string, values map[string]int32) int32 {
	return values[prefix+strings.ToUpper(word)]
}

// ModeProto is the API's form of a policy mode.
func ModeProto(m policy.Mode) termdv1.Mode {
	return termdv1.Mode(enumOf("MODE_", string(m), termdv1.Mode_value))
}

// ModeFromProto is the policy's form of an API mode; UNSPECIFIED or an
// unknown value is an error naming the modes.
func ModeFromProto(m termdv1.Mode) (policy.Mode, error) {
	if mode, err := policy.ParseMode(strings.ToLower(strings.TrimPrefix(m.String(), "MODE_"))); err == nil {
		return mode, nil
	}
	return "", errdefs.Invalid("mode %v is not one of inspect, confirm, trusted", m)
}

// VerdictProto is the API's form of a policy verdict.
func VerdictProto(v policy.Verdict) termdv1.Verdict {
	return termdv1.Verdict(enumOf("VERDICT_", string(v), termdv1.Verdict_value))
}

// RiskProto is the API's form of a policy risk.
func RiskProto(r policy.Risk) termdv1.Risk {
	return termdv1.Risk(enumOf("RISK_", string(r), termdv1.Risk_value))
}

// DecisionProto is the API's form of a policy decision (redact it first:
// RedactDecision).
func DecisionProto(d policy.Decision) *termdv1.Decision {
	out := &termdv1.Decision{
		Verdict:         VerdictProto(d.Verdict),
		Risk:            RiskProto(d.Risk),
		Reasons:         slices.Clone(d.Reasons),
		Rules:           slices.Clone(d.Rules),
		PolicyVersion:   d.PolicyVersion,
		RequestHash:     d.RequestHash,
		Argv:            slices.Clone(d.Argv),
		ResolvedPath:    d.ResolvedPath,
		BinarySha256:    d.BinarySHA256,
		Cwd:             d.Cwd,
		Env:             maps.Clone(d.Env),
		Mode:            ModeProto(d.Mode),
		Network:         d.Network,
		RunsProjectCode: d.RunsProjectCode,
		ReadOnly:        d.ReadOnly,
		Writes:          slices.Clone(d.Writes),
		TimeoutSeconds:  uint32(d.Timeout / time.Second),
		RunAs:           d.RunAs,
		ExecArgv:        slices.Clone(d.ExecArgv),
		Sandbox:         SandboxProto(d.Sandbox),
		Tty:             TerminalProto(d.TTY),
		Credentials:     slices.Clone(d.Credentials),
		Privileged:      d.Privileged,
	}
	if d.Stdin != nil {
		out.Stdin = &termdv1.StdinInfo{Bytes: uint64(d.Stdin.Bytes), Sha256: d.Stdin.SHA256}
	}
	for _, s := range d.Steps {
		out.Steps = append(out.Steps, &termdv1.PolicyStep{Name: s.Name, Outcome: s.Outcome, Detail: s.Detail})
	}
	return out
}

// PreviewOf is what running the decided command would do, in a line.
func PreviewOf(d policy.Decision) *termdv1.Preview {
	prog := d.ResolvedPath
	if prog == "" && len(d.Argv) > 0 {
		prog = d.Argv[0]
	}
	if prog == "" {
		prog = "the command"
	}
	p := &termdv1.Preview{
		Program:         prog,
		Writes:          slices.Clone(d.Writes),
		Network:         d.Network,
		RunsProjectCode: d.RunsProjectCode,
		ReadOnly:        d.ReadOnly,
		Sandbox:         SandboxProto(d.Sandbox),
	}
	var parts []string
	switch {
	case d.Verdict == policy.Deny:
		parts = append(parts, "will not run")
	case d.ReadOnly:
		parts = append(parts, "reads only")
	case len(d.Writes) > 0:
		parts = append(parts, fmt.Sprintf("may write %s", strings.Join(shortPaths(d.Writes), ", ")))
	default:
		parts = append(parts, "may change files")
	}
	if d.RunsProjectCode {
		parts = append(parts, "runs project code")
	}
	if d.Network {
		parts = append(parts, "uses the network")
	}
	if d.Verdict != policy.Deny {
		parts = append(parts, "times out after "+d.Timeout.String())
		parts = append(parts, "sandbox "+d.Sandbox.Profile)
	}
	p.Summary = filepath.Base(prog) + ": " + strings.Join(parts, "; ")
	return p
}

// SandboxProto is the API's form of a plan's sandbox profile, the one
// conversion of it to the proto (enforcement, the daemon's level, is added
// by the plan: plan.go).
func SandboxProto(sb domain.Profile) *termdv1.SandboxProfile {
	return &termdv1.SandboxProfile{
		Profile:     sb.Profile,
		Network:     sb.Network,
		NetworkMode: sb.NetworkMode,
		Exec:        slices.Clone(sb.Exec),
		Read:        slices.Clone(sb.Read),
		Write:       slices.Clone(sb.Write),
		Cache:       slices.Clone(sb.Cache),
	}
}

func shortPaths(ps []string) []string {
	if len(ps) > 5 {
		return append(slices.Clone(ps[:5]), fmt.Sprintf("and %d more", len(ps)-5))
	}
	return ps
}

// RedactDecision removes secrets from what a decision shows (argv, env,
// reasons, paths it writes, step details); the hash was computed by the policy on the real
// request. It replaces d's slices and maps rather than writing into them:
// they are shared with the request, which must keep the real values.
func RedactDecision(r *receiptstore.Redactor, d *policy.Decision) {
	d.Argv = r.RedactAll(d.Argv)
	d.ExecArgv = r.RedactAll(d.ExecArgv)
	d.Reasons = r.RedactAll(d.Reasons)
	d.Writes = r.RedactAll(d.Writes)
	if len(d.Steps) > 0 {
		steps := slices.Clone(d.Steps)
		for i := range steps {
			steps[i].Detail = r.Redact(steps[i].Detail)
		}
		d.Steps = steps
	}
	d.Cwd = r.Redact(d.Cwd)
	if len(d.Env) > 0 {
		env := make(map[string]string, len(d.Env))
		for k, v := range d.Env {
			env[k] = redactEnvValue(r, k, v)
		}
		d.Env = env
	}
}

// RedactRequest is a copy of req with its secrets redacted and without its
// stdin.
func RedactRequest(r *receiptstore.Redactor, req *termdv1.CommandRequest) *termdv1.CommandRequest {
	c := proto.Clone(req).(*termdv1.CommandRequest)
	c.Argv = r.RedactAll(c.Argv)
	c.Command = r.Redact(c.Command)
	c.Cwd = r.Redact(c.Cwd)
	c.Stdin = nil // the plan holds it (planRec.stdin); the decision describes it
	for k, v := range c.Env {
		c.Env[k] = redactEnvValue(r, k, v)
	}
	return c
}

// redactEnvValue redacts v as the value of variable k (so NAME_TOKEN=... shapes apply).
func redactEnvValue(r *receiptstore.Redactor, k, v string) string {
	red := r.Redact(k + "=" + v)
	if strings.HasPrefix(red, k+"=") {
		return red[len(k)+1:]
	}
	return "[REDACTED]"
}

// TerminalProto is the API's form of a decided terminal (nil: none).
func TerminalProto(t *policy.Terminal) *termdv1.TerminalOptions {
	if t == nil {
		return nil
	}
	return &termdv1.TerminalOptions{Rows: uint32(t.Rows), Cols: uint32(t.Cols), IdleTimeoutSeconds: uint32(t.Idle / time.Second)}
}

// ExecutionOfReceipt is a finished execution termd no longer holds (its
// plan was forgotten, or termd restarted) as its receipt r tells it: the
// final state of its status word (OUTCOME_UNKNOWN when it names none).
func ExecutionOfReceipt(id string, r *receipt.Receipt) *termdv1.Execution {
	e := &termdv1.Execution{
		Id: id, PlanId: r.PlanID, SessionId: r.SessionID, ReceiptId: r.ID,
		State:       termdv1.ExecutionState_EXECUTION_STATE_OUTCOME_UNKNOWN,
		StartedAt:   timestamppb.New(r.StartedAt),
		FinishedAt:  timestamppb.New(r.FinishedAt),
		DurationMs:  r.DurationMs,
		Signal:      r.Signal,
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes,
		OutputTruncated: r.OutputTruncated,
		Error:           r.Detail,
	}
	if st, ok := domain.EndState(string(r.Status)); ok {
		e.State = st.Proto()
	}
	if r.ExitCode != nil {
		e.ExitCode = int32(*r.ExitCode)
	}
	if r.Sandbox != nil {
		e.NetworkIsolated = r.Sandbox.NetworkNamespace
	}
	return e
}
