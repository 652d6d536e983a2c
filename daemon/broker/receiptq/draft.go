package receiptq

import (
	"bytes"
	"fmt"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Draft is what a plan's receipt says before its command runs: the plan,
// the request it was decided on and the decision, in the form Receipt
// fills from them.
type Draft struct {
	Plan      *termdv1.Plan
	SessionID string
	Request   policy.Request
	Decision  policy.Decision // as the plan holds it (redacted)
	Limits    policy.Limits   // the policy's limits
	// Digest is the receipts' keyed digest (receiptstore.Keys.Digest).
	Digest func([]byte) string
	// RunAsRequester is config run_as_requester: commands run as their
	// requester (nil: the default, true).
	RunAsRequester *bool
	// Credential is who a user name or uid runs as
	// (executions.CredentialFor).
	Credential func(who string) (*syscall.Credential, error)
}

// Receipt fills everything known before the command runs; now is its start
// and, until it finishes, its end.
func (in Draft) Receipt(now time.Time) *receipt.Receipt {
	d, p, lim := in.Decision, in.Plan, in.Limits
	cmd := cmdline.Quote(in.Request.Argv)
	switch {
	case len(in.Request.Argv) > 0:
	case len(d.Argv) > 0:
		cmd = cmdline.Quote(d.Argv)
	default:
		cmd = in.Request.Command // a command string that could not be split
	}
	r := &receipt.Receipt{
		ID:            uuid.NewString(),
		PlanID:        p.Id,
		SessionID:     in.SessionID,
		RequestHash:   d.RequestHash,
		Requester:     domain.ReceiptPrincipal(p.Requester),
		Command:       cmd,
		CommandSHA256: in.Digest([]byte(cmd)),
		BinaryPath:    d.ResolvedPath,
		BinarySHA256:  d.BinarySHA256,
		Cwd:           d.Cwd,
		Mode:          string(d.Mode),
		Risk:          string(d.Risk),
		Decision:      string(d.Verdict),
		Approved:      p.Approval != nil,
		GrantID:       p.GrantId,
		Policy: receipt.Policy{
			Allowed:          d.Verdict != policy.Deny,
			Risk:             string(d.Risk),
			RequiresApproval: d.Verdict == policy.Ask || p.FlaggedByAdviser,
			Reasons:          d.Reasons,
			Argv:             d.Argv,
			Version:          d.PolicyVersion,
			RuleIDs:          d.Rules,
		},
		Limits: receipt.Limits{
			TimeoutMs:      d.Timeout.Milliseconds(),
			MaxOutputBytes: lim.OutputBytes,
			MemoryBytes:    lim.MemoryBytes,
			MaxPids:        lim.Pids,
		},
		StartedAt:    now,
		FinishedAt:   now,
		AdviceDigest: p.AdviceDigest,
		Privileged:   d.Privileged,
	}
	if d.Stdin != nil {
		r.Stdin = &receipt.Stdin{Bytes: d.Stdin.Bytes, SHA256: d.Stdin.SHA256}
	}
	if a := p.Approval; a != nil {
		ap := domain.ReceiptPrincipal(a.Approver)
		r.Approver = &ap
	}
	if d.RunAs != "" {
		if c, err := in.Credential(d.RunAs); err == nil {
			r.RunAs = &receipt.RunAs{User: d.RunAs, UID: int(c.Uid), GID: int(c.Gid)}
		}
	} else if rr := in.RunAsRequester; (rr == nil || *rr) && p.Requester != nil {
		// The gid the command runs with is the account's (spec), not the
		// one the requester's process happened to hold when it connected.
		uid := p.Requester.Uid
		ra := &receipt.RunAs{User: config.UserName(uid), UID: int(uid), GID: int(p.Requester.Gid)}
		if c, err := in.Credential(strconv.FormatUint(uint64(uid), 10)); err == nil {
			ra.GID = int(c.Gid)
		}
		r.RunAs = ra
	}
	return r
}

// Decided makes r the receipt of a final state in which nothing ran
// (blocked, denied, expired); by is who denied it.
func Decided(r *receipt.Receipt, status string, by *termdv1.Principal, detail string) {
	r.Status = receipt.Status(status)
	r.Detail = detail
	if by != nil && status == "denied" {
		ap := domain.ReceiptPrincipal(by)
		r.Approver = &ap
		r.Approved = false
	}
}

// Finished records in r how execution execID ended: its status, exit,
// times and output.
func Finished(r *receipt.Receipt, execID string, res runner.Result, detail string) {
	r.ExecutionID = execID
	r.Status = receipt.Status(res.Status)
	r.Detail = detail
	if !res.FinishedAt.IsZero() {
		r.FinishedAt = res.FinishedAt
	}
	r.DurationMs = res.Duration.Milliseconds()
	switch {
	case res.Err != nil:
		// Never started: recorded as a shell would (127), with the cause in detail.
		code := 127
		r.ExitCode = &code
	case res.Signal == "" && res.ExitCode >= 0:
		code := res.ExitCode
		r.ExitCode = &code
	}
	r.Signal = res.Signal
	r.Stdout, r.Stderr = keptText(res.Stdout), keptText(res.Stderr)
	r.StdoutBytes, r.StderrBytes = res.Stdout.Total, res.Stderr.Total
	r.StdoutDigest, r.StderrDigest = res.Stdout.Digest, res.Stderr.Digest
	r.StdoutTruncated, r.StderrTruncated = res.Stdout.Truncated, res.Stderr.Truncated
	r.OutputTruncated = res.Stdout.Truncated || res.Stderr.Truncated
}

// keptText is the kept output as receipt text. Binary output (NUL bytes or
// invalid UTF-8) is not copied into the receipt: its byte count and keyed
// digest prove what was produced, and JSON-escaping it would multiply its size.
func keptText(s runner.StreamResult) string {
	if bytes.IndexByte(s.Kept, 0) >= 0 || !utf8.Valid(s.Kept) {
		return fmt.Sprintf("[binary output not kept in the receipt: %d bytes; see the stream digest]", s.Total)
	}
	return string(s.Kept)
}
