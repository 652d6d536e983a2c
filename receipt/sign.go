package receipt

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
)

// KeyIDFor is the key id of a public key: the first 16 hex digits of the
// SHA-256 of the raw 32-byte key.
func KeyIDFor(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Signer signs receipts: the current Ed25519 key with its id, and the HMAC
// signing key. The daemon holds it (receiptstore.Keys); nothing outside the
// daemon has a private key.
type Signer struct {
	KeyID   string
	Ed25519 ed25519.PrivateKey
	HMAC    []byte
}

// Sign sets key_id and fills signature (HMAC-SHA256) and signature_ed25519
// over the canonical receipt without its signature fields.
func (s Signer) Sign(r *Receipt) error {
	r.Normalize()
	r.KeyID = s.KeyID
	msg, err := SigningBytes(r)
	if err != nil {
		return err
	}
	s.sign(r, msg)
	return nil
}

func (s Signer) sign(r *Receipt, msg []byte) {
	r.Signature = hmacHex(s.HMAC, msg)
	r.SignatureEd25519 = hex.EncodeToString(ed25519.Sign(s.Ed25519, msg))
}

// SignCanonical is Sign followed by CanonicalBytes, with one encoding and
// one parse instead of two: it signs r and returns its canonical signed
// bytes. With validate, the parsed tree they were written from is checked
// against the schema (without parsing the bytes again).
func (s Signer) SignCanonical(r *Receipt, validate bool) (body []byte, err error) {
	r.Normalize()
	r.KeyID = s.KeyID
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	v, err := parseTree(raw)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(jsonObject)
	if !ok {
		return nil, errors.New("receipt: not a JSON object")
	}
	msg, err := writeTree(obj, signatureFields, len(raw))
	if err != nil {
		return nil, err
	}
	s.sign(r, msg)
	// The tree now gets exactly the members json.Marshal would give the
	// signed receipt: the two signatures (always present, no omitempty).
	setMember(&obj, "signature", r.Signature)
	setMember(&obj, "signature_ed25519", r.SignatureEd25519)
	body, err = writeTree(obj, nil, len(raw)+len(r.Signature)+len(r.SignatureEd25519))
	if err != nil {
		return nil, err
	}
	if validate {
		if err := validateTree(obj); err != nil {
			return nil, err
		}
	}
	return body, nil
}

func setMember(obj *jsonObject, key string, val any) {
	for i := range *obj {
		if (*obj)[i].key == key {
			(*obj)[i].val = val
			return
		}
	}
	*obj = append(*obj, member{key: key, val: val})
}

func hmacHex(key, msg []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return hex.EncodeToString(m.Sum(nil))
}

// SigningBytes is the canonical JSON (RFC 8785) of r without signature and
// signature_ed25519: the bytes both signatures cover.
func SigningBytes(r *Receipt) ([]byte, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return canonicalize(raw, signatureFields)
}

// CanonicalBytes is the canonical JSON of the whole signed receipt. The
// store keeps exactly these bytes, and the next receipt's prev_hash is their
// SHA-256.
func CanonicalBytes(r *Receipt) ([]byte, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return Canonicalize(raw)
}

// ChainHash is the SHA-256 (lowercase hex) of a receipt's canonical signed
// JSON, i.e. the prev_hash its successor carries.
func ChainHash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}
