// Package token holds the one rule for bearer tokens that termd-gateway and
// termd-mcp accept: at least 32 random bytes written as text.
package token

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// MinLen is the shortest accepted token: 32 bytes in unpadded base64 (43
// characters); hex (64) and padded base64 (44) are longer.
const MinLen = 43

// minDistinct rejects tokens that are long but plainly not random
// ("aaaa…", "0101…"); 32 random bytes in base64 or hex have far more.
const minDistinct = 12

// Check says why a token is not acceptable, in words with the fix.
func Check(v string) error {
	if strings.ContainsAny(v, " \t\r\n") {
		return errors.New("the token must be one line without spaces")
	}
	if len(v) < MinLen {
		return fmt.Errorf("the token is too weak: %d characters, at least %d are required (32 random bytes), e.g. `head -c 32 /dev/urandom | base64` or `openssl rand -hex 32`", len(v), MinLen)
	}
	distinct := map[rune]bool{}
	for _, r := range v {
		distinct[r] = true
	}
	if len(distinct) < minDistinct {
		return fmt.Errorf("the token is too weak: it uses only %d different characters and does not look random; use `head -c 32 /dev/urandom | base64`", len(distinct))
	}
	return nil
}

// New returns 32 random bytes as unpadded base64url.
func New() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
