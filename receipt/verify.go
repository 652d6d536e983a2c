package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/x509"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/termd/termd/internal/schemacheck"
)

// SchemaJSON is the current receipt JSON Schema (1.7, draft 2020-12). The
// gateway serves it as is.
//
//go:embed schema/receipt-1.7.json
var SchemaJSON []byte

// schema16 is 1.7 without the principal kind cert and principal.gateway.
//
//go:embed schema/receipt-1.6.json
var schema16 []byte

// schema15 is 1.6 without stdin, input_released and sandbox.network_mode.
//
//go:embed schema/receipt-1.5.json
var schema15 []byte

//go:embed schema/receipt-1.4.json
var schema14 []byte

//go:embed schema/receipt-1.3.json
var schema13 []byte

// schema10 to schema15 are the earlier schemas: receipts written before 1.1
// (no sandbox), before 1.2 (no grant_id), before 1.3 (no terminal), before
// 1.4 (no credentials), before 1.5 (no privileged, run_as.host_uid,
// git_identity), before 1.6 (no stdin, input_released, sandbox.network_mode)
// and before 1.7 (no cert principals, principal.gateway) keep verifying.
//
//go:embed schema/receipt-1.2.json
var schema12 []byte

//
//go:embed schema/receipt-1.0.json
var schema10 []byte

//go:embed schema/receipt-1.1.json
var schema11 []byte

// SchemaURL is the $id of SchemaJSON.
const SchemaURL = "https://termd.dev/schema/receipt-1.7.json"

// Schemas are the schema documents by schema_version.
var Schemas = map[string][]byte{"1.0": schema10, "1.1": schema11, "1.2": schema12, "1.3": schema13, "1.4": schema14, "1.5": schema15, "1.6": schema16, SchemaVersion: SchemaJSON}

type compiled struct {
	once sync.Once
	s    *schemacheck.Schema
	err  error
}

var compiledByVersion = map[string]*compiled{"1.0": {}, "1.1": {}, "1.2": {}, "1.3": {}, "1.4": {}, "1.5": {}, "1.6": {}, SchemaVersion: {}}

// compiledSchema is the schema of one receipt version, compiled on first use
// (nothing is done at start: termctl's start-up does not pay for it).
func compiledSchema(version string) (*schemacheck.Schema, error) {
	cs, ok := compiledByVersion[version]
	if !ok {
		return nil, fmt.Errorf("receipt schema_version %v is not supported: this verifier reads %s", version, supportedVersions())
	}
	cs.once.Do(func() {
		cs.s, cs.err = schemacheck.Compile(Schemas[version])
		if cs.err != nil {
			cs.err = fmt.Errorf("receipt %w", cs.err)
		}
	})
	return cs.s, cs.err
}

func supportedVersions() string { return "1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6 and " + SchemaVersion }

// ValidateSchema checks a receipt document against the schema of its
// schema_version.
func ValidateSchema(data []byte) error {
	inst, err := decodeInstance(data)
	if err != nil {
		return err
	}
	return validateInstance(inst)
}

// decodeInstance parses a document into the values the schema check reads
// (objects as maps, numbers as json.Number).
func decodeInstance(data []byte) (any, error) {
	tree, err := parseTree(data)
	if err != nil {
		return nil, fmt.Errorf("receipt: not JSON: %w", err)
	}
	return schemaInstance(tree)
}

// validateInstance checks a decoded document against the schema its
// schema_version names.
func validateInstance(inst any) error {
	if err := looksLikeReceipt(inst); err != nil {
		return err
	}
	version := inst.(map[string]any)["schema_version"].(string)
	sch, err := compiledSchema(version)
	if err != nil {
		return err
	}
	if errs := sch.Validate(inst); len(errs) > 0 {
		err := errs[0]
		return fmt.Errorf("receipt does not match schema %s: %w", version, err)
	}
	return nil
}

// CheckIsReceipt says, in one line, when a document is not a termd receipt
// at all (not JSON, a plan, a list), before any key is needed.
func CheckIsReceipt(data []byte) error {
	inst, err := decodeInstance(data)
	if err != nil {
		return err
	}
	return looksLikeReceipt(inst)
}

// looksLikeReceipt refuses, in one line, a document that is not a termd
// receipt at all (a plan, an execution, a list), before the schema would
// list every member it lacks.
func looksLikeReceipt(inst any) error {
	obj, ok := inst.(map[string]any)
	if !ok {
		return fmt.Errorf("not a termd receipt: the document is a JSON %s, a receipt is one object (export one with `termctl receipts export ID`)", schemacheck.KindOf(inst))
	}
	v, ok := obj["schema_version"]
	if !ok {
		return errors.New("not a termd receipt: it has no schema_version member (is it a plan or an execution? export a receipt with `termctl receipts export ID`)")
	}
	if vs, ok := v.(string); !ok || Schemas[vs] == nil {
		return fmt.Errorf("receipt schema_version %v is not supported: this verifier reads %s", v, supportedVersions())
	}
	return nil
}

// validateTree checks a parsed receipt (the tree its canonical bytes were
// written from) against the 1.0 schema without parsing the bytes again. The
// instance holds the same values as the canonical bytes: numbers in their
// canonical form.
func validateTree(tree jsonObject) error {
	inst, err := schemaInstance(tree)
	if err != nil {
		return err
	}
	return validateInstance(inst)
}

// schemaInstance converts a parse tree into the value types the schema
// validator reads from JSON (objects as maps, numbers as json.Number).
func schemaInstance(v any) (any, error) {
	switch t := v.(type) {
	case jsonObject:
		m := make(map[string]any, len(t))
		for _, mem := range t {
			x, err := schemaInstance(mem.val)
			if err != nil {
				return nil, err
			}
			m[mem.key] = x
		}
		return m, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			x, err := schemaInstance(e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("jcs: number %s: %w", t, err)
		}
		s, err := FormatNumber(f)
		if err != nil {
			return nil, err
		}
		return json.Number(s), nil
	case nil, bool, string:
		return t, nil
	}
	return nil, fmt.Errorf("receipt: unexpected value type %T", v)
}

// Verify checks r: the schema, the Ed25519 signature by a key in pub, and
// the HMAC signature when hmacKey is given (inside the daemon; offline
// verification has only public keys). It does not check the chain link; see
// Store.VerifyReceipt for that.
func Verify(r *Receipt, pub map[string]ed25519.PublicKey, hmacKey []byte) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = verifyRaw(raw, pub, hmacKey, true)
	return err
}

// VerifyJSON verifies a receipt document offline: schema, then the Ed25519
// signature over the RFC 8785 form of exactly the members in data. It needs
// no store and no daemon state.
func VerifyJSON(data []byte, pub map[string]ed25519.PublicKey) (*Receipt, error) {
	r, err := verifyRaw(data, pub, nil, true)
	if err != nil && r == nil {
		// A receipt edited by hand usually breaks the schema first ("exit_code
		// must be 0"); say that it was altered when the signature says so.
		if _, serr := verifyRaw(data, pub, nil, false); serr != nil {
			var ve *VerifyError
			if errors.As(serr, &ve) && strings.Contains(ve.Reason, "signature does not match") {
				return nil, fmt.Errorf("%s (also: %s)", ve.Reason, firstLine(err.Error()))
			}
		}
	}
	return r, err
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// VerifyStored checks a receipt body as the store keeps it: both signatures
// (with the HMAC key), without the schema (a full-chain check would triple
// in cost; Append validated it).
func VerifyStored(body []byte, pub map[string]ed25519.PublicKey, hmacKey []byte) (*Receipt, error) {
	return verifyRaw(body, pub, hmacKey, false)
}

// verifyRaw is the one verification path: every check works on the bytes
// that were given, never on a re-encoding that could hide a member.
func verifyRaw(data []byte, pub map[string]ed25519.PublicKey, hmacKey []byte, schema bool) (*Receipt, error) {
	if schema {
		if err := ValidateSchema(data); err != nil {
			return nil, err
		}
	}
	var r Receipt
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, &VerifyError{Reason: "cannot decode: " + err.Error()}
	}
	if err := verifySignatures(data, &r, pub, hmacKey); err != nil {
		return &r, err
	}
	return &r, nil
}

func verifySignatures(data []byte, r *Receipt, pub map[string]ed25519.PublicKey, hmacKey []byte) error {
	return verifySigned(data, r.KeyID, r.Signature, r.SignatureEd25519, r.Seq, pub, hmacKey)
}

// verifySigned checks a signed document's Ed25519 (and, with hmacKey, HMAC)
// signature over its canonical form without the signature members.
func verifySigned(data []byte, keyID, signature, sigEd25519 string, seq int64, pub map[string]ed25519.PublicKey, hmacKey []byte) error {
	msg, err := canonicalize(data, signatureFields)
	if err != nil {
		return &VerifyError{Seq: seq, Reason: err.Error()}
	}
	pk, ok := pub[keyID]
	if !ok {
		return &VerifyError{Seq: seq, Reason: fmt.Sprintf("signed by unknown key id %q: pass the public key file that holds it", keyID)}
	}
	if KeyIDFor(pk) != keyID {
		return &VerifyError{Seq: seq, Reason: fmt.Sprintf("public key given for key id %q does not have that id", keyID)}
	}
	sig, err := hex.DecodeString(sigEd25519)
	if err != nil || len(sig) != ed25519.SignatureSize || strings.ToLower(sigEd25519) != sigEd25519 {
		return &VerifyError{Seq: seq, Reason: "malformed signature_ed25519"}
	}
	if !ed25519.Verify(pk, msg, sig) {
		return &VerifyError{Seq: seq, Reason: "Ed25519 signature does not match: the receipt was altered or signed by another key"}
	}
	if hmacKey != nil {
		want := hmacHex(hmacKey, msg)
		if !hmac.Equal([]byte(want), []byte(signature)) {
			return &VerifyError{Seq: seq, Reason: "HMAC signature does not match"}
		}
	}
	return nil
}

// publicKeyJSON is the JSON public-key file format: one object or an array.
type publicKeyJSON struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"` // standard base64 of the raw 32-byte key
}

// encodePublicPEM writes a plain SPKI "PUBLIC KEY" block, without headers,
// so that OpenSSL and other tools read it as is. The key id is derived from
// the key (KeyIDFor), so it needs no header: termctl prints it beside the key
// and key files are named by it. id is checked, not written.
func encodePublicPEM(id string, pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err) // cannot fail for an Ed25519 key
	}
	if id != KeyIDFor(pub) {
		panic("receipt: key id " + id + " does not belong to the key")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// PublicKeyJSON encodes keys in the JSON public-key file format.
func PublicKeyJSON(keys map[string]ed25519.PublicKey) []byte {
	var out []publicKeyJSON
	for id, pk := range keys {
		out = append(out, publicKeyJSON{KeyID: id, PublicKey: base64.StdEncoding.EncodeToString(pk)})
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return b
}

// ParsePublicKeyFile reads Ed25519 public keys from a file that holds
// either PEM "PUBLIC KEY" blocks (PKIX, optional Key-Id header), or JSON: an
// object {"key_id", "public_key" (base64)} or an array of them. The key id
// is always derived from the key; a stated key id that differs is an error.
func ParsePublicKeyFile(data []byte) (map[string]ed25519.PublicKey, error) {
	out := map[string]ed25519.PublicKey{}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("public key file is empty")
	}
	add := func(stated string, pk ed25519.PublicKey) error {
		id := KeyIDFor(pk)
		if stated != "" && stated != id {
			return fmt.Errorf("key id %q does not match the key (its id is %q)", stated, id)
		}
		out[id] = pk
		return nil
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		var list []publicKeyJSON
		if trimmed[0] == '{' {
			var one publicKeyJSON
			if err := json.Unmarshal(trimmed, &one); err != nil {
				return nil, fmt.Errorf("public key file: %w", err)
			}
			list = append(list, one)
		} else if err := json.Unmarshal(trimmed, &list); err != nil {
			return nil, fmt.Errorf("public key file: %w", err)
		}
		for _, e := range list {
			if e.PublicKey == "" {
				return nil, errors.New("this is not a public key file (no public_key member; is it a receipt?): get the key with `termctl receipts public-key > termd.pub`")
			}
			raw, err := base64.StdEncoding.DecodeString(e.PublicKey)
			if err != nil || len(raw) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("public key file: public_key for %q is not a base64 Ed25519 key", e.KeyID)
			}
			if err := add(e.KeyID, ed25519.PublicKey(raw)); err != nil {
				return nil, err
			}
		}
	} else {
		rest := trimmed
		for {
			var blk *pem.Block
			blk, rest = pem.Decode(rest)
			if blk == nil {
				break
			}
			if blk.Type != "PUBLIC KEY" {
				return nil, fmt.Errorf("public key file: unexpected PEM block %q", blk.Type)
			}
			key, err := x509.ParsePKIXPublicKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("public key file: %w", err)
			}
			pk, ok := key.(ed25519.PublicKey)
			if !ok {
				return nil, errors.New("public key file: not an Ed25519 key")
			}
			if err := add(blk.Headers["Key-Id"], pk); err != nil {
				return nil, err
			}
		}
		if len(bytes.TrimSpace(rest)) != 0 {
			return nil, errors.New("public key file: trailing data that is not PEM")
		}
	}
	if len(out) == 0 {
		return nil, errors.New("public key file holds no keys")
	}
	return out, nil
}
