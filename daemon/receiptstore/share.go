package receiptstore

import (
	"fmt"

	"github.com/termd/termd/receipt"
)

// SharingMarker replaces each field a share export removes.
const SharingMarker = "[REDACTED FOR SHARING]"

// ShareExport returns a copy of r fit to share outside the organisation:
// command, cwd, argv, stdout, stderr, the policy reasons, the detail and the
// text of terminal inputs are replaced with SharingMarker,
// sharing_redacted is set, and the copy is signed again with the current
// key. Only a receipt whose signatures verify can be exported. The copy keeps
// seq and prev_hash, so it still names its place in the chain, but it is not
// itself a chain member (its hash differs from the stored receipt's).
func ShareExport(r *receipt.Receipt, k *Keys) (*receipt.Receipt, error) {
	if r == nil {
		return nil, fmt.Errorf("share export: no receipt")
	}
	if err := receipt.Verify(r, k.PublicKeys(), k.HMACKey()); err != nil {
		return nil, fmt.Errorf("share export: only a valid signed receipt can be exported: %w", err)
	}
	return SignShare(ShareForm(r), k)
}

// ShareForm is the unsigned share copy of r (see ShareExport): what it
// holds beyond the markers is small, so it can be kept to be signed later.
// r is not modified.
func ShareForm(r *receipt.Receipt) *receipt.Receipt {
	c := r.Clone()
	c.Command = SharingMarker
	c.Cwd = SharingMarker
	c.Policy.Argv = []string{SharingMarker}
	c.Stdout = SharingMarker
	c.Stderr = SharingMarker
	// Reasons and detail quote operands ("path /root/.ssh/prod_key holds
	// secrets"): they go too.
	if len(c.Policy.Reasons) > 0 {
		c.Policy.Reasons = []string{SharingMarker}
	}
	if c.Detail != "" {
		c.Detail = SharingMarker
	}
	// What was typed into a terminal goes; its digests stay.
	if c.Terminal != nil {
		for i := range c.Terminal.Inputs {
			if c.Terminal.Inputs[i].Kind == "input" {
				c.Terminal.Inputs[i].Text = SharingMarker
			}
		}
	}
	c.SharingRedacted = true
	return c
}

// SignShareJSON signs a share form from ShareForm (in place) and returns
// it as receipt.IndentedJSON, encoded once (receipt.Signer.SignIndented).
func SignShareJSON(c *receipt.Receipt, k *Keys) ([]byte, error) {
	return k.Signer().SignIndented(c)
}

// SignShare signs a share form from ShareForm (in place) and returns it.
func SignShare(c *receipt.Receipt, k *Keys) (*receipt.Receipt, error) {
	if err := k.Sign(c); err != nil {
		return nil, err
	}
	return c, nil
}
