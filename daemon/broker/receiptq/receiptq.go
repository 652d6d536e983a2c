// Package receiptq answers the questions asked about termd's receipts: get,
// list, export (as stored or re-signed for sharing), verify a document or
// the whole chain, prune the chain's start, and full-text search. Every
// answer holds only what the caller may see (an agent, its own requests'
// receipts), the receipt of an execution termd no longer holds
// (OfExecution), and the signing keys (PublicKeys). It also writes what a
// plan's receipt says (draft.go): what was asked, decided and approved and
// who the command runs as (Draft), then how it ended (Finished) or why
// nothing ran (Decided). Storing receipts and what only the broker knows
// of an execution (its sandbox, terminal, credentials) are the broker's.
//
// It may import daemon/domain (principals and visibility), config, policy
// and runner (the decision and result a receipt records), the receipt
// store, the search index, errdefs, the generated proto and the receipt
// format; never daemon/broker nor a sibling package under it.
package receiptq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/search"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Receipts answers queries about receipts. Its zero value is not usable:
// the broker fills every field but Search (nil: no search).
type Receipts struct {
	Store *receiptstore.Store
	Keys  *receiptstore.Keys
	// Search is the full-text index over the receipts (nil = no search).
	Search *search.Index
	Log    *slog.Logger
	Now    func() time.Time
	// Session fails, as the broker's session calls do, when caller may
	// not see session id (it is not theirs, or there is none).
	Session func(caller *termdv1.Principal, id string) error

	shares shareCache // share forms of receipts just sealed (share.go)
}

// Summary is the searchable part of a receipt.
func Summary(r *receipt.Receipt) *termdv1.ReceiptSummary {
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

// GetReceipt returns a receipt by id, or the latest of a session.
func (rq *Receipts) GetReceipt(_ context.Context, caller *termdv1.Principal, id, sessionID string) (*receipt.Receipt, error) {
	var r *receipt.Receipt
	var err error
	switch {
	case id != "":
		r, err = rq.Store.Get(id)
	case sessionID != "":
		if err := rq.Session(caller, sessionID); err != nil {
			return nil, err
		}
		r, err = rq.Store.Latest(sessionID)
	default:
		return nil, errdefs.Invalid("pass a receipt_id, or a session_id for its latest receipt")
	}
	if errors.Is(err, receiptstore.ErrNotFound) || (err == nil && !domain.ReceiptVisible(caller, r)) {
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
func (rq *Receipts) ExportReceipts(ctx context.Context, caller *termdv1.Principal, q *termdv1.ExportReceiptsRequest, send func(*receipt.Receipt) error) error {
	rs, err := rq.listReceipts(caller, &termdv1.ListReceiptsRequest{SessionId: q.SessionId, Status: q.Status, Since: q.Since, Until: q.Until, Principal: q.Principal}, -1, false)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if q.Share {
			if r, err = receiptstore.ShareExport(r, rq.Keys); err != nil {
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
func (rq *Receipts) ListReceipts(_ context.Context, caller *termdv1.Principal, q *termdv1.ListReceiptsRequest) ([]*receipt.Receipt, error) {
	return rq.listReceipts(caller, q, int(q.Limit), true)
}

func (rq *Receipts) listReceipts(caller *termdv1.Principal, q *termdv1.ListReceiptsRequest, limit int, desc bool) ([]*receipt.Receipt, error) {
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
	rs, err := rq.Store.List(f)
	if err != nil {
		return nil, errdefs.Internal("listing receipts: %v", err)
	}
	out := rs[:0]
	for _, r := range rs {
		if domain.ReceiptVisible(caller, r) {
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
func (rq *Receipts) ExportReceipt(ctx context.Context, caller *termdv1.Principal, id string, share bool) (*receipt.Receipt, error) {
	r, err := rq.GetReceipt(ctx, caller, id, "")
	if err != nil {
		return nil, err
	}
	if !share {
		return r, nil
	}
	out, err := receiptstore.ShareExport(r, rq.Keys)
	if err != nil {
		return nil, errdefs.Precondition("receipt %s cannot be exported for sharing: %v", id, err)
	}
	return out, nil
}

// VerifyReceipt checks a receipt document: schema, both signatures, chain.
func (rq *Receipts) VerifyReceipt(_ context.Context, data []byte) *termdv1.VerifyReceiptResponse {
	out := &termdv1.VerifyReceiptResponse{}
	if err := receipt.ValidateSchema(data); err != nil {
		out.Problems = append(out.Problems, "schema: "+err.Error())
	} else {
		out.SchemaOk = true
	}
	r, err := receipt.VerifyJSON(data, rq.Keys.PublicKeys())
	if err != nil {
		out.Problems = append(out.Problems, "ed25519: "+err.Error())
	} else {
		out.Ed25519Ok = true
		out.KeyId = r.KeyID
		if verr := receipt.Verify(r, rq.Keys.PublicKeys(), rq.Keys.HMACKey()); verr != nil {
			out.Problems = append(out.Problems, "hmac: "+verr.Error())
		} else {
			out.HmacOk = true
		}
		if cerr := rq.Store.VerifyReceipt(r); cerr != nil {
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
func (rq *Receipts) VerifyAuditChain(_ context.Context, r *termdv1.VerifyAuditChainRequest) *termdv1.VerifyAuditChainResponse {
	n, bad, err := rq.Store.VerifyChain()
	out := &termdv1.VerifyAuditChainResponse{Ok: err == nil, Checked: int64(n), BadSeq: bad}
	if err != nil {
		out.Problem = fmt.Sprint(err)
		return out
	}
	out.HeadSeq, out.HeadHash, _ = rq.Store.Head()
	cp, _, _ := rq.Store.LastCheckpoint()
	if cp != nil {
		out.PrunedThrough = cp.HeadSeq
	}
	if r.GetExpectSeq() > 0 {
		seq, hash := rq.chainHash(r.ExpectSeq)
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
func (rq *Receipts) PruneReceipts(_ context.Context, caller *termdv1.Principal, r *termdv1.PruneReceiptsRequest) (*termdv1.PruneReceiptsResponse, error) {
	if r.GetBefore() == nil {
		return nil, errdefs.Invalid("before is required: receipts that started before it are pruned (termctl receipts prune --before 2026-01-01)")
	}
	before := r.Before.AsTime()
	if before.After(rq.Now()) {
		return nil, errdefs.Invalid("before %s is in the future: prune only receipts that are already old", before.Format(time.RFC3339))
	}
	c, err := rq.Store.Prune(before, domain.PrincipalKey(caller))
	out := &termdv1.PruneReceiptsResponse{}
	switch {
	case errors.Is(err, receiptstore.ErrNothingToPrune):
		out.NothingPruned = true
	case err != nil:
		return nil, errdefs.Precondition("%v", err)
	default:
		_, body, _ := rq.Store.LastCheckpoint()
		out.Pruned, out.FirstSeq, out.HeadSeq, out.HeadHash = c.Count, c.FirstSeq, c.HeadSeq, c.HeadHash
		out.From, out.Until, out.CheckpointJson = timestamppb.New(c.From), timestamppb.New(c.Until), string(body)
		rq.Log.Info("pruned receipts", "by", domain.PrincipalKey(caller), "before", before, "pruned", c.Count, "first_seq", c.FirstSeq, "head_seq", c.HeadSeq)
	}
	out.ReceiptsLeft, _ = rq.Store.Count()
	return out, nil
}

// chainHash returns seq and the hash the next receipt links to (0, "" when absent).
func (rq *Receipts) chainHash(seq int64) (int64, string) {
	r, err := rq.Store.GetSeq(seq)
	if err != nil {
		return 0, ""
	}
	c, err := receipt.CanonicalBytes(r)
	if err != nil {
		return 0, ""
	}
	return seq, receipt.ChainHash(c)
}

// OfExecution is the receipt of execution id, for a caller who may see it;
// nil when there is none (or no store).
func (rq *Receipts) OfExecution(caller *termdv1.Principal, id string) (*receipt.Receipt, error) {
	if rq.Store == nil || id == "" {
		return nil, nil
	}
	r, err := rq.Store.ByExecution(id)
	if errors.Is(err, receiptstore.ErrNotFound) || (err == nil && !domain.ReceiptVisible(caller, r)) {
		return nil, nil
	}
	if err != nil {
		return nil, errdefs.Internal("reading the receipt of execution %s: %v", id, err)
	}
	return r, nil
}

// PublicKeys are the receipt signing keys, current first.
func (rq *Receipts) PublicKeys() *termdv1.GetPublicKeyResponse {
	out := &termdv1.GetPublicKeyResponse{}
	cur := rq.Keys.KeyID()
	for id, pub := range rq.Keys.PublicKeys() {
		pem := string(receipt.PublicKeyPEMFor(id, pub))
		k := &termdv1.PublicKey{KeyId: id, Pem: pem, Current: id == cur}
		if k.Current {
			out.Keys = append([]*termdv1.PublicKey{k}, out.Keys...)
		} else {
			out.Keys = append(out.Keys, k)
		}
	}
	return out
}
