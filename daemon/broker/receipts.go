package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
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
	sum := summaryOf(stored)
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
	r.Sandbox = receiptSandbox(e.sandbox, res.NetNSApplied, e.netMode)
	e.receiptHostIdentity(r)
	if e.hub != nil {
		r.Terminal = e.hub.receiptTerminal()
	}
	r.Credentials = e.credentials
	r.GitIdentity = e.gitIdentity
	r.Egress = e.receiptEgress()
	e.redactor.RedactReceipt(r)
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

func summaryOf(r *receipt.Receipt) *termdv1.ReceiptSummary {
	s := &termdv1.ReceiptSummary{
		Id:          r.ID,
		Seq:         r.Seq,
		PlanId:      r.PlanID,
		SessionId:   r.SessionID,
		Status:      string(r.Status),
		Command:     r.Command,
		StartedAt:   timestamppb.New(r.StartedAt),
		FinishedAt:  timestamppb.New(r.FinishedAt),
		Requester:   principalText(r.Requester),
		RequestHash: r.RequestHash,
		Decision:    r.Decision,
	}
	if r.ExitCode != nil {
		s.ExitCode = int32(*r.ExitCode)
	} else {
		s.ExitCode = -1
	}
	if r.Approver != nil {
		s.Approver = principalText(*r.Approver)
	}
	return s
}

// principalText names a principal for people: "root (uid:0)", "token:console",
// "token:alice via gateway (through gateway gw-1)".
func principalText(p receipt.Principal) string {
	if p.Gateway != "" {
		return p.Name + " (through gateway " + p.Gateway + ")"
	}
	if p.Name == "" || p.Name == p.ID || strings.HasPrefix(p.Name, p.ID) {
		if p.Name != "" {
			return p.Name
		}
		return p.ID
	}
	return p.Name + " (" + p.ID + ")"
}

// receiptVisible says whether caller may see r: an agent sees its own.
func (b *Broker) receiptVisible(caller *termdv1.Principal, r *receipt.Receipt) bool {
	switch caller.GetRole() {
	case termdv1.Role_ROLE_OPERATOR, termdv1.Role_ROLE_VIEWER:
		return true
	}
	return r.Requester.ID == domain.PrincipalKey(caller)
}

// GetReceipt returns a receipt by id, or the latest of a session.
func (b *Broker) GetReceipt(_ context.Context, caller *termdv1.Principal, id, sessionID string) (*receipt.Receipt, error) {
	var r *receipt.Receipt
	var err error
	switch {
	case id != "":
		r, err = b.Store.Get(id)
	case sessionID != "":
		b.mu.Lock()
		_, serr := b.sessionLocked(caller, sessionID)
		b.unlock()
		if serr != nil {
			return nil, serr
		}
		r, err = b.Store.Latest(sessionID)
	default:
		return nil, errdefs.Invalid("pass a receipt_id, or a session_id for its latest receipt")
	}
	if errors.Is(err, receiptstore.ErrNotFound) || (err == nil && !b.receiptVisible(caller, r)) {
		if id == "" {
			return nil, errdefs.NotFound("session %s has no receipt yet", sessionID)
		}
		return nil, errdefs.NotFound("receipt %s not found (see `termctl receipts list`)", id)
	}
	if err != nil {
		return nil, errdefs.Internal("reading receipts: %v", err)
	}
	return r, nil
}

// ExportReceipts sends every receipt matching the filter, in chain order.
func (b *Broker) ExportReceipts(ctx context.Context, caller *termdv1.Principal, q *termdv1.ExportReceiptsRequest, send func(*receipt.Receipt) error) error {
	rs, err := b.listReceipts(caller, &termdv1.ListReceiptsRequest{SessionId: q.SessionId, Status: q.Status, Since: q.Since, Until: q.Until, Principal: q.Principal}, -1, false)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if q.Share {
			if r, err = receiptstore.ShareExport(r, b.Keys); err != nil {
				return errdefs.Precondition("receipt %s cannot be exported for sharing: %v", r.ID, err)
			}
		}
		if err := send(r); err != nil {
			return err
		}
	}
	return nil
}

// maxReceiptPage bounds one ListReceipts answer (a receipt may hold over a
// megabyte of output, and the whole page is built in memory).
const maxReceiptPage = 1000

// ListReceipts lists receipts by filter, newest first; an agent sees only its own.
func (b *Broker) ListReceipts(_ context.Context, caller *termdv1.Principal, q *termdv1.ListReceiptsRequest) ([]*receipt.Receipt, error) {
	return b.listReceipts(caller, q, int(q.Limit), true)
}

func (b *Broker) listReceipts(caller *termdv1.Principal, q *termdv1.ListReceiptsRequest, limit int, desc bool) ([]*receipt.Receipt, error) {
	f := receiptstore.Filter{SessionID: q.SessionId, Principal: q.Principal, Limit: limit, Offset: int(q.Offset), Desc: desc}
	if q.Status != "" {
		st := receipt.Status(strings.ToLower(q.Status))
		if !st.Valid() {
			return nil, errdefs.Invalid("status %q is not a receipt status (%s)", q.Status, statusList())
		}
		f.Status = st
	}
	if q.Since != nil {
		f.Since = q.Since.AsTime()
	}
	if q.Until != nil {
		f.Until = q.Until.AsTime()
	}
	if limit < -1 || q.Limit < 0 || q.Offset < 0 {
		return nil, errdefs.Invalid("limit and offset must not be negative")
	}
	if limit > maxReceiptPage {
		return nil, errdefs.Invalid("limit %d is over %d receipts per call; page with offset, or stream everything with `termctl receipts export --all`", limit, maxReceiptPage)
	}
	if caller.GetRole() == termdv1.Role_ROLE_AGENT {
		if f.Principal != "" && f.Principal != domain.PrincipalKey(caller) {
			return nil, nil
		}
		f.Principal = domain.PrincipalKey(caller)
	}
	rs, err := b.Store.List(f)
	if err != nil {
		return nil, errdefs.Internal("listing receipts: %v", err)
	}
	out := rs[:0]
	for _, r := range rs {
		if b.receiptVisible(caller, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func statusList() string {
	var s []string
	for _, st := range receipt.Statuses {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

// ExportReceipt returns a receipt as stored, or re-signed for sharing.
func (b *Broker) ExportReceipt(ctx context.Context, caller *termdv1.Principal, id string, share bool) (*receipt.Receipt, error) {
	r, err := b.GetReceipt(ctx, caller, id, "")
	if err != nil {
		return nil, err
	}
	if !share {
		return r, nil
	}
	out, err := receiptstore.ShareExport(r, b.Keys)
	if err != nil {
		return nil, errdefs.Precondition("receipt %s cannot be exported for sharing: %v", id, err)
	}
	return out, nil
}

// VerifyReceipt checks a receipt document: schema, both signatures, chain.
func (b *Broker) VerifyReceipt(_ context.Context, data []byte) *termdv1.VerifyReceiptResponse {
	out := &termdv1.VerifyReceiptResponse{}
	if err := receipt.ValidateSchema(data); err != nil {
		out.Problems = append(out.Problems, "schema: "+err.Error())
	} else {
		out.SchemaOk = true
	}
	r, err := receipt.VerifyJSON(data, b.Keys.PublicKeys())
	if err != nil {
		out.Problems = append(out.Problems, "ed25519: "+err.Error())
	} else {
		out.Ed25519Ok = true
		out.KeyId = r.KeyID
		if verr := receipt.Verify(r, b.Keys.PublicKeys(), b.Keys.HMACKey()); verr != nil {
			out.Problems = append(out.Problems, "hmac: "+verr.Error())
		} else {
			out.HmacOk = true
		}
		if cerr := b.Store.VerifyReceipt(r); cerr != nil {
			out.Problems = append(out.Problems, "chain: "+cerr.Error())
		} else {
			out.ChainOk = true
		}
	}
	out.Valid = out.SchemaOk && out.Ed25519Ok && out.HmacOk
	return out
}

// VerifyAuditChain checks the whole chain, reports its head, and checks that
// a head recorded earlier is still in it (receipts removed from the end
// leave a valid but shorter chain; only an outside record can tell).
func (b *Broker) VerifyAuditChain(_ context.Context, r *termdv1.VerifyAuditChainRequest) *termdv1.VerifyAuditChainResponse {
	n, bad, err := b.Store.VerifyChain()
	out := &termdv1.VerifyAuditChainResponse{Ok: err == nil, Checked: int64(n), BadSeq: bad}
	if err != nil {
		out.Problem = fmt.Sprint(err)
		return out
	}
	out.HeadSeq, out.HeadHash, _ = b.Store.Head()
	cp, _, _ := b.Store.LastCheckpoint()
	if cp != nil {
		out.PrunedThrough = cp.HeadSeq
	}
	if r.GetExpectSeq() > 0 {
		seq, hash := b.chainHash(r.ExpectSeq)
		switch {
		case cp != nil && r.ExpectSeq == cp.HeadSeq:
			// The checkpoint names the pruned head's hash.
			seq, hash = cp.HeadSeq, cp.HeadHash
		case cp != nil && r.ExpectSeq < cp.HeadSeq:
			// Pruned: the signed checkpoint vouches for continuity past it;
			// its own hash can no longer be compared.
			return out
		}
		switch {
		case seq == 0:
			out.Ok, out.BadSeq = false, r.ExpectSeq
			out.Problem = fmt.Sprintf("the chain ends at seq %d but seq %d was recorded earlier: receipts were removed from the end", out.HeadSeq, r.ExpectSeq)
		case r.ExpectHash != "" && hash != r.ExpectHash:
			out.Ok, out.BadSeq = false, r.ExpectSeq
			out.Problem = fmt.Sprintf("seq %d has hash %s, not the %s recorded earlier: the chain was rewritten", r.ExpectSeq, hash, r.ExpectHash)
		}
	}
	return out
}

// PruneReceipts removes the receipts that started before r.Before from the
// start of the chain and leaves a signed checkpoint (receiptstore.Prune).
func (b *Broker) PruneReceipts(_ context.Context, caller *termdv1.Principal, r *termdv1.PruneReceiptsRequest) (*termdv1.PruneReceiptsResponse, error) {
	if r.GetBefore() == nil {
		return nil, errdefs.Invalid("before is required: receipts that started before it are pruned (termctl receipts prune --before 2026-01-01)")
	}
	before := r.Before.AsTime()
	if before.After(b.Now()) {
		return nil, errdefs.Invalid("before %s is in the future: prune only receipts that are already old", before.Format(time.RFC3339))
	}
	c, err := b.Store.Prune(before, domain.PrincipalKey(caller))
	out := &termdv1.PruneReceiptsResponse{}
	switch {
	case errors.Is(err, receiptstore.ErrNothingToPrune):
		out.NothingPruned = true
	case err != nil:
		return nil, errdefs.Precondition("%v", err)
	default:
		_, body, _ := b.Store.LastCheckpoint()
		out.Pruned, out.FirstSeq, out.HeadSeq, out.HeadHash = c.Count, c.FirstSeq, c.HeadSeq, c.HeadHash
		out.From, out.Until, out.CheckpointJson = timestamppb.New(c.From), timestamppb.New(c.Until), string(body)
		b.Log.Info("pruned receipts", "by", domain.PrincipalKey(caller), "before", before, "pruned", c.Count, "first_seq", c.FirstSeq, "head_seq", c.HeadSeq)
	}
	out.ReceiptsLeft, _ = b.Store.Count()
	return out, nil
}

// chainHash returns seq and the hash the next receipt links to (0, "" when absent).
func (b *Broker) chainHash(seq int64) (int64, string) {
	r, err := b.Store.GetSeq(seq)
	if err != nil {
		return 0, ""
	}
	c, err := receipt.CanonicalBytes(r)
	if err != nil {
		return 0, ""
	}
	return seq, receipt.ChainHash(c)
}
