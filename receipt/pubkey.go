package receipt

import "crypto/ed25519"

// PublicKeyPEMFor encodes one public key as a PEM block with its Key-Id header.
func PublicKeyPEMFor(id string, pub ed25519.PublicKey) []byte { return encodePublicPEM(id, pub) }
