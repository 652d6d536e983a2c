package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
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
	r.Signature, r.SignatureEd25519 = s.signatures(msg)
}

// signatures are the HMAC-SHA256 and the Ed25519 signature of msg, in hex:
// what a receipt's and a checkpoint's signature and signature_ed25519 hold.
func (s Signer) signatures(msg []byte) (mac, ed string) {
	return hmacHex(s.HMAC, msg), hex.EncodeToString(ed25519.Sign(s.Ed25519, msg))
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
func SigningBytes(r *Receipt) ([]byte, error) { return signingBytes(r) }

// signingBytes is the canonical JSON of a signed document (a receipt or a
// checkpoint) without its signature members.
func signingBytes(doc any) ([]byte, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return canonicalize(raw, signatureFields)
}

// CanonicalBytes is the canonical JSON of the whole signed receipt. The
// store keeps exactly these bytes, and the next receipt's prev_hash is their
// SHA-256.
func CanonicalBytes(r *Receipt) ([]byte, error) { return canonicalBytes(r) }

// canonicalBytes is the canonical JSON of a whole signed document.
func canonicalBytes(doc any) ([]byte, error) {
	raw, err := json.Marshal(doc)
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

// Prepared is a receipt encoded, and schema-checked, before its place in the
// chain is known; Seal gives it seq and prev_hash and signs it. The chain's
// single writer only seals: encoding and checking run in each appending
// caller's goroutine, side by side.
type Prepared struct {
	s    Signer
	r    *Receipt
	obj  jsonObject
	size int
}

// Placeholders of the shape Seal writes, so that the schema check of a
// prepared receipt is the check of the sealed one (no rule of the schema
// looks at these values beyond their shape).
var (
	placeholderHMAC    = strings.Repeat("0", 64)
	placeholderEd25519 = strings.Repeat("0", 128)
)

// Prepare encodes r (normalized, with the signer's key id) and, with
// validate, checks it against the schema. r belongs to the Prepared until
// Seal returns.
func (s Signer) Prepare(r *Receipt, validate bool) (*Prepared, error) {
	r.Normalize()
	r.KeyID = s.KeyID
	r.Seq, r.PrevHash = 1, GenesisHash
	r.Signature, r.SignatureEd25519 = placeholderHMAC, placeholderEd25519
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
	if validate {
		if err := validateTree(obj); err != nil {
			return nil, err
		}
	}
	// Sorted once here: Seal writes it twice (signing bytes, then the
	// signed receipt) and replaces members in place.
	sortTree(obj)
	return &Prepared{s: s, r: r, obj: obj, size: len(raw)}, nil
}

// Receipt is the receipt being prepared (signed once Seal returned).
func (p *Prepared) Receipt() *Receipt { return p.r }

// Seal places the receipt at seq after prevHash, signs it and returns its
// canonical signed bytes (what SignCanonical returns).
func (p *Prepared) Seal(seq int64, prevHash string) ([]byte, error) {
	r := p.r
	r.Seq, r.PrevHash = seq, prevHash
	setMember(&p.obj, "seq", number(strconv.FormatInt(seq, 10)))
	setMember(&p.obj, "prev_hash", prevHash)
	if body, ok, err := p.sealOnce(); ok || err != nil {
		return body, err
	}
	msg, err := writeTree(p.obj, signatureFields, p.size)
	if err != nil {
		return nil, err
	}
	p.s.sign(r, msg)
	setMember(&p.obj, "signature", r.Signature)
	setMember(&p.obj, "signature_ed25519", r.SignatureEd25519)
	return writeTree(p.obj, nil, p.size)
}

// sealOnce writes the canonical receipt once, with the placeholder
// signatures: the signing bytes are those bytes without the two signature
// members (adjacent in canonical order, after the first member), and the
// signatures then replace the placeholders in place (same length). ok is
// false, with nothing written, when the tree does not have that shape.
func (p *Prepared) sealOnce() (body []byte, ok bool, err error) {
	obj := p.obj
	i := slices.IndexFunc(obj, func(m member) bool { return m.key == signatureFields[0] })
	if i < 1 || i+1 >= len(obj) || obj[i+1].key != signatureFields[1] || !inOrder(obj) ||
		obj[i].val != placeholderHMAC || obj[i+1].val != placeholderEd25519 {
		return nil, false, nil
	}
	var buf bytes.Buffer
	buf.Grow(p.size + 64)
	buf.WriteByte('{')
	var cut, resume, sigAt, edAt int
	for j, m := range obj {
		if j == i {
			cut = buf.Len()
		}
		if j > 0 {
			buf.WriteByte(',')
		}
		writeString(&buf, m.key)
		buf.WriteByte(':')
		switch j {
		case i:
			sigAt = buf.Len() + 1 // after the opening quote
		case i + 1:
			edAt = buf.Len() + 1
		}
		if err := writeCanonical(&buf, m.val); err != nil {
			return nil, false, err
		}
		if j == i+1 {
			resume = buf.Len()
		}
	}
	buf.WriteByte('}')
	body = buf.Bytes()
	msg := make([]byte, 0, len(body)-(resume-cut))
	msg = append(append(msg, body[:cut]...), body[resume:]...)
	r := p.r
	p.s.sign(r, msg)
	if len(r.Signature) != len(placeholderHMAC) || len(r.SignatureEd25519) != len(placeholderEd25519) {
		return nil, false, errors.New("receipt: signature of an unexpected length")
	}
	copy(body[sigAt:], r.Signature)
	copy(body[edAt:], r.SignatureEd25519)
	setMember(&p.obj, "signature", r.Signature)
	setMember(&p.obj, "signature_ed25519", r.SignatureEd25519)
	return body, true, nil
}

// IndentedJSON is r as the daemon hands a receipt out (GetReceipt,
// ExportReceipt): json.MarshalIndent with two spaces.
func IndentedJSON(r *Receipt) ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// SignIndented is Sign followed by IndentedJSON(r), with r encoded once
// for both: marshalled with placeholder signatures (the Receipt's last two
// members, never omitted), canonicalized without them to be signed, the
// signatures then written over the placeholders, and the result indented
// (what MarshalIndent does after its Marshal).
func (s Signer) SignIndented(r *Receipt) ([]byte, error) {
	r.Normalize()
	r.KeyID = s.KeyID
	r.Signature, r.SignatureEd25519 = placeholderHMAC, placeholderEd25519
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	msg, err := canonicalize(raw, signatureFields)
	if err != nil {
		return nil, err
	}
	s.sign(r, msg)
	tail := `,"signature":"` + r.Signature + `","signature_ed25519":"` + r.SignatureEd25519 + `"}`
	if at := len(raw) - len(tail); at > 0 && string(raw[at:]) == placeholderTail {
		copy(raw[at:], tail)
	} else if raw, err = json.Marshal(r); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// placeholderTail is how a receipt marshalled with the placeholder
// signatures ends.
var placeholderTail = `,"signature":"` + placeholderHMAC + `","signature_ed25519":"` + placeholderEd25519 + `"}`
