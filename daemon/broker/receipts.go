package broker

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/broker/receiptq"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// draftReceipt fills everything known before a command runs.
func (b *Broker) draftReceipt(p *planRec, now time.Time) *receipt.Receipt {
	d := p.dec
	lim := b.Policy.Current().Limits()
	cmd := cmdline.Quote(p.req.Argv)
	switch {
	case len(p.req.Argv) > 0:
	case len(d.Argv) > 0:
		cmd = cmdline.Quote(d.Argv)
	default:
		cmd = p.req.Command // a command string that could not be split
	}
	r := &receipt.Receipt{
		ID:            uuid.NewString(),
		PlanID:        p.p.Id,
		SessionID:     p.session.id,
		RequestHash:   d.RequestHash,
		Requester:     domain.ReceiptPrincipal(p.p.Requester),
		Command:       cmd,
		CommandSHA256: b.Keys.Digest([]byte(cmd)),
		BinaryPath:    d.ResolvedPath,
		BinarySHA256:  d.BinarySHA256,
		Cwd:           d.Cwd,
		Mode:          string(d.Mode),
		Risk:          string(d.Risk),
		Decision:      string(d.Verdict),
		Approved:      p.p.Approval != nil,
		GrantID:       p.p.GrantId,
		Policy: receipt.Policy{
			Allowed:          d.Verdict != policy.Deny,
			Risk:             string(d.Risk),
			RequiresApproval: d.Verdict == policy.Ask || p.p.FlaggedByAdviser,
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
		AdviceDigest: p.p.AdviceDigest,
		Privileged:   d.Privileged,
	}
	if d.Stdin != nil {
		r.Stdin = &receipt.Stdin{Bytes: d.Stdin.Bytes, SHA256: d.Stdin.SHA256}
	}
	if a := p.p.Approval; a != nil {
		ap := domain.ReceiptPrincipal(a.Approver)
		r.Approver = &ap
	}
	if d.RunAs != "" {
		if c, err := executions.CredentialFor(d.RunAs); err == nil {
			r.RunAs = &receipt.RunAs{User: d.RunAs, UID: int(c.Uid), GID: int(c.Gid)}
		}
	} else if rr := b.Config().RunAsRequester; (rr == nil || *rr) && p.p.Requester != nil {
		// The gid the command runs with is the account's (spec), not the
		// one the requester's process happened to hold when it connected.
		uid := p.p.Requester.Uid
		ra := &receipt.RunAs{User: config.UserName(uid), UID: int(uid), GID: int(p.p.Requester.Gid)}
		if c, err := executions.CredentialFor(strconv.FormatUint(uint64(uid), 10)); err == nil {
			ra.GID = int(c.Gid)
		}
		r.RunAs = ra
	}
	return r
}

// decisionReceiptLocked records a final state in which nothing ran
// (blocked, denied, expired).
func (b *Broker) decisionReceiptLocked(p *planRec, status string, by *termdv1.Principal, detail string) {
	r := b.draftReceipt(p, b.Now())
	r.Status = receipt.Status(status)
	r.Detail = detail
	if by != nil && status == "denied" {
		ap := domain.ReceiptPrincipal(by)
		r.Approver = &ap
		r.Approved = false
	}
	b.Redactor.RedactReceipt(r)
	stored, err := b.Store.Append(r)
	if err != nil {
		b.Log.Error("could not store a decision receipt", "plan", p.p.Id, "status", status, "error", err)
		return
	}
	p.p.ReceiptId = stored.ID
	p.p.NextStep = nextStep(p.p)
	_ = b.journalPlanLocked(p)
	sum := receiptq.Summary(stored)
	b.Bus.Publish(p.session.id, termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Receipt{Receipt: sum} })
}

// finalReceipt builds the receipt of an execution that ended.
func (b *Broker) finalReceipt(p *planRec, e *execRec, res runner.Result, detail string) *receipt.Receipt {
	r := b.draftReceipt(p, res.StartedAt)
	r.ExecutionID = e.id
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
	r.Sandbox = executions.ReceiptSandbox(e.Sandbox, res.NetNSApplied)
	e.ReceiptHostIdentity(r)
	if e.hub != nil {
		r.Terminal = e.hub.Receipt()
	}
	r.Credentials = e.Credentials
	r.GitIdentity = e.GitIdentity
	r.Egress = e.egress.Receipt()
	e.Redactor.RedactReceipt(r)
	return r
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
