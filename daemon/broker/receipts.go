package broker

import (
	"time"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/broker/receiptq"
	"github.com/termd/termd/daemon/runner"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// draftReceipt fills everything known before a command runs (receiptq.Draft).
func (b *Broker) draftReceipt(p *planRec, now time.Time) *receipt.Receipt {
	return receiptq.Draft{Plan: p.p, SessionID: p.session.ID, Request: p.req, Decision: p.dec, Limits: b.Policy.Current().Limits(),
		Digest: b.Keys.Digest, RunAsRequester: b.Config().RunAsRequester, Credential: executions.CredentialFor}.Receipt(now)
}

// decisionReceiptLocked records a final state in which nothing ran
// (blocked, denied, expired).
func (b *Broker) decisionReceiptLocked(p *planRec, status string, by *termdv1.Principal, detail string) {
	r := b.draftReceipt(p, b.Now())
	receiptq.Decided(r, status, by, detail)
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
	b.Bus.Publish(p.session.ID, termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Receipt{Receipt: sum} })
}

// finalReceipt builds the receipt of an execution that ended.
func (b *Broker) finalReceipt(p *planRec, e *execRec, res runner.Result, detail string) *receipt.Receipt {
	r := b.draftReceipt(p, res.StartedAt)
	receiptq.Finished(r, e.id, res, detail)
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
