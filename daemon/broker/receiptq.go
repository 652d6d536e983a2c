package broker

import (
	"context"

	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// The receipt queries are daemon/broker/receiptq's (b.receipts); the
// methods below are the ones the server and the broker's own callers use.

// sessionVisible fails when caller may not see session id (receiptq's
// Receipts.Session).
func (b *Broker) sessionVisible(caller *termdv1.Principal, id string) error {
	b.mu.Lock()
	_, err := b.sessionLocked(caller, id)
	b.unlock()
	return err
}

// GetReceipt returns a receipt by id, or the latest of a session.
func (b *Broker) GetReceipt(ctx context.Context, caller *termdv1.Principal, id, sessionID string) (*receipt.Receipt, error) {
	return b.receipts.GetReceipt(ctx, caller, id, sessionID)
}

// ExportReceipts sends every receipt matching the filter, in chain order.
func (b *Broker) ExportReceipts(ctx context.Context, caller *termdv1.Principal, q *termdv1.ExportReceiptsRequest, send func(*receipt.Receipt) error) error {
	return b.receipts.ExportReceipts(ctx, caller, q, send)
}

// ListReceipts lists receipts by filter, newest first; an agent sees only its own.
func (b *Broker) ListReceipts(ctx context.Context, caller *termdv1.Principal, q *termdv1.ListReceiptsRequest) ([]*receipt.Receipt, error) {
	return b.receipts.ListReceipts(ctx, caller, q)
}

// ExportReceipt returns a receipt as stored, or re-signed for sharing.
func (b *Broker) ExportReceipt(ctx context.Context, caller *termdv1.Principal, id string, share bool) (*receipt.Receipt, error) {
	return b.receipts.ExportReceipt(ctx, caller, id, share)
}

// ShareReceiptJSON is ExportReceipt's share form of receipt id, as the
// server sends it (receipt.IndentedJSON).
func (b *Broker) ShareReceiptJSON(ctx context.Context, caller *termdv1.Principal, id string) ([]byte, error) {
	return b.receipts.ShareReceiptJSON(ctx, caller, id)
}

// VerifyReceipt checks a receipt document: schema, both signatures, chain.
func (b *Broker) VerifyReceipt(ctx context.Context, data []byte) *termdv1.VerifyReceiptResponse {
	return b.receipts.VerifyReceipt(ctx, data)
}

// VerifyAuditChain checks the whole chain and that a head recorded earlier is still in it.
func (b *Broker) VerifyAuditChain(ctx context.Context, r *termdv1.VerifyAuditChainRequest) *termdv1.VerifyAuditChainResponse {
	return b.receipts.VerifyAuditChain(ctx, r)
}

// PruneReceipts removes the receipts that started before r.Before from the
// start of the chain and leaves a signed checkpoint.
func (b *Broker) PruneReceipts(ctx context.Context, caller *termdv1.Principal, r *termdv1.PruneReceiptsRequest) (*termdv1.PruneReceiptsResponse, error) {
	return b.receipts.PruneReceipts(ctx, caller, r)
}

// SearchReceipts finds receipts by a literal phrase among those the caller may see.
func (b *Broker) SearchReceipts(ctx context.Context, caller *termdv1.Principal, r *termdv1.SearchReceiptsRequest) (*termdv1.SearchReceiptsResponse, error) {
	return b.receipts.SearchReceipts(ctx, caller, r)
}

// ReindexReceipts rebuilds the search index from the receipts (operators).
func (b *Broker) ReindexReceipts(ctx context.Context, caller *termdv1.Principal) (*termdv1.ReindexReceiptsResponse, error) {
	return b.receipts.ReindexReceipts(ctx, caller)
}
