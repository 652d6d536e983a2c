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
func (b *Broker) PublicKeys() *termdv1.GetPublicKeyResponse {
	out := &termdv1.GetPublicKeyResponse{}
	cur := b.Keys.KeyID()
	for id, pub := range b.Keys.PublicKeys() {
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

// GetPolicy describes the active policy.
func (b *Broker) GetPolicy() *termdv1.GetPolicyResponse { return wire.PolicyProto(b.Policy.Current()) }

// ReloadPolicy re-reads the policy file, then the project policies
// (daemon/broker/projects); a bad file keeps the last good policy.
func (b *Broker) ReloadPolicy() (*termdv1.ReloadPolicyResponse, error) {
	return b.projects.Reload()
}
