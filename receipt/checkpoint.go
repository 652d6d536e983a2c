package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CheckpointType is the "type" member of every checkpoint document.
const CheckpointType = "termd.receipt-checkpoint"

// Checkpoint is what pruning leaves where the oldest receipts of a chain
// were: the pruned head (its seq and chain hash, which the first kept
// receipt's prev_hash must equal), how many receipts and which seqs and
// start times were removed, and a link to the checkpoint before it. It is
// signed like a receipt (RFC 8785 canonical JSON without the signature
// members, Ed25519 and HMAC), so the chain from the checkpoint onward still
// proves continuity.
type Checkpoint struct {
	Type string `json:"type"`
	// HeadSeq and HeadHash are the last pruned receipt: its seq and the
	// SHA-256 of its canonical signed JSON.
	HeadSeq  int64  `json:"head_seq"`
	HeadHash string `json:"head_hash"`
	// FirstSeq..HeadSeq were removed by this prune (Count of them).
	FirstSeq int64 `json:"first_seq"`
	Count    int64 `json:"count"`
	// From and Until are the oldest and newest started_at pruned.
	From  time.Time `json:"from"`
	Until time.Time `json:"until"`
	// Before is the cut-off the operator asked for.
	Before time.Time `json:"before"`
	// PrevCheckpoint is the hash of the previous checkpoint ("" for the first).
	PrevCheckpoint string    `json:"prev_checkpoint"`
	CreatedAt      time.Time `json:"created_at"`
	// By is the principal that pruned.
	By               string `json:"by"`
	KeyID            string `json:"key_id"`
	Signature        string `json:"signature"`
	SignatureEd25519 string `json:"signature_ed25519"`
}

func (c *Checkpoint) normalize() {
	c.Type = CheckpointType
	for _, t := range []*time.Time{&c.From, &c.Until, &c.Before, &c.CreatedAt} {
		*t = t.UTC().Round(0)
	}
}

// SignCheckpoint signs c and returns its canonical signed bytes; their
// ChainHash is what the next checkpoint's prev_checkpoint names.
func (s Signer) SignCheckpoint(c *Checkpoint) ([]byte, error) {
	c.normalize()
	c.KeyID = s.KeyID
	msg, err := signingBytes(c)
	if err != nil {
		return nil, err
	}
	c.Signature, c.SignatureEd25519 = s.signatures(msg)
	return canonicalBytes(c)
}

// VerifyCheckpoint checks a checkpoint document: its members (no unknown
// ones), its type, that its numbers add up, and its signatures (the HMAC one
// only when hmacKey is given, inside the daemon).
func VerifyCheckpoint(data []byte, pub map[string]ed25519.PublicKey, hmacKey []byte) (*Checkpoint, error) {
	var c Checkpoint
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("checkpoint: cannot decode: %w", err)
	}
	switch {
	case c.Type != CheckpointType:
		return nil, fmt.Errorf("checkpoint: type %q, want %q", c.Type, CheckpointType)
	case c.FirstSeq < 1 || c.HeadSeq < c.FirstSeq || c.Count != c.HeadSeq-c.FirstSeq+1:
		return nil, fmt.Errorf("checkpoint: seqs %d–%d do not match a count of %d", c.FirstSeq, c.HeadSeq, c.Count)
	case !isHex(c.HeadHash, 64):
		return nil, fmt.Errorf("checkpoint: head_hash is not a SHA-256")
	}
	if err := verifySigned(data, c.KeyID, c.Signature, c.SignatureEd25519, c.HeadSeq, pub, hmacKey); err != nil {
		var ve *VerifyError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("checkpoint of seq %d–%d: %s", c.FirstSeq, c.HeadSeq, strings.Replace(ve.Reason, "the receipt was altered", "the checkpoint was altered", 1))
		}
		return nil, err
	}
	return &c, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
