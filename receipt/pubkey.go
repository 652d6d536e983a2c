package receipt

import "crypto/ed25519"

// PublicKeyPEMFor encodes one public key as a plain SPKI PEM block (no headers;
// the key id is derived from the key).
func PublicKeyPEMFor(id string, pub ed25519.PublicKey) []byte { return encodePublicPEM(id, pub) }
