// Package token holds the one rule for bearer tokens that termd-gateway and
// termd-mcp accept (at least 32 random bytes written as text) and the one
// reader of token files.
package token

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// MinLen is the shortest accepted token: 32 bytes in unpadded base64 (43
// characters); hex (64) and padded base64 (44) are longer.
const MinLen = 43

// minDistinct rejects tokens that are long but plainly not random
// ("aaaa…", "0101…"); 32 random bytes in base64 or hex have far more.
const minDistinct = 12

// ErrWeak is wrapped by Check's errors about a token too short or too
// regular to resist guessing.
var ErrWeak = errors.New("the token is too weak")

// Check says why a token is not acceptable, in words with the fix.
func Check(v string) error {
	if strings.ContainsAny(v, " \t\r\n") {
		return errors.New("the token must be one line without spaces")
	}
	if len(v) < MinLen {
		return fmt.Errorf("%w: %d characters, at least %d are required (32 random bytes), e.g. `head -c 32 /dev/urandom | base64` or `openssl rand -hex 32`", ErrWeak, len(v), MinLen)
	}
	distinct := map[rune]bool{}
	for _, r := range v {
		distinct[r] = true
	}
	if len(distinct) < minDistinct {
		return fmt.Errorf("%w: it uses only %d different characters and does not look random; use `head -c 32 /dev/urandom | base64`", ErrWeak, len(distinct))
	}
	return nil
}

// ReadFile reads a token file: one line, surrounding space trimmed. It
// refuses a file group or others can read or write, and a token Check
// refuses.
func ReadFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s is accessible by other users (mode %v); run `chmod 600 %s`", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if err := Check(v); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return v, nil
}

// New returns 32 random bytes as unpadded base64url.
func New() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
