package broker

import (
	"github.com/termd/termd/daemon/broker/receiptq"
	"github.com/termd/termd/daemon/broker/wire"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Summary is the searchable part of a receipt.
func Summary(r *receipt.Receipt) *termdv1.ReceiptSummary { return receiptq.Summary(r) }

// PublicKeys returns the receipt signing keys, current first.
func (b *Broker) PublicKeys() *termdv1.GetPublicKeyResponse { return b.receipts.PublicKeys() }

// GetPolicy describes the active policy.
func (b *Broker) GetPolicy() *termdv1.GetPolicyResponse { return wire.PolicyProto(b.Policy.Current()) }

// ReloadPolicy re-reads the policy file, then the project policies
// (daemon/broker/projects); a bad file keeps the last good policy.
func (b *Broker) ReloadPolicy() (*termdv1.ReloadPolicyResponse, error) {
	return b.projects.Reload()
}
