package token

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func TestRandomTokensInEveryCommonSpellingAreAccepted(t *testing.T) {
	for i := 0; i < 500; i++ {
		b := make([]byte, 32)
		rand.Read(b)
		for _, v := range []string{base64.StdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b), hex.EncodeToString(b), New()} {
			if err := Check(v); err != nil {
				t.Fatalf("%q refused: %v", v, err)
			}
		}
	}
}

func TestWeakTokensAreRefusedWithTheFix(t *testing.T) {
	for _, v := range []string{"", "short-token", strings.Repeat("a", 64), strings.Repeat("01", 40), "x" + strings.Repeat("ab cd", 10)} {
		err := Check(v)
		if err == nil {
			t.Fatalf("%q accepted", v)
		}
		if !strings.Contains(err.Error(), "random") && !strings.Contains(err.Error(), "spaces") {
			t.Fatalf("%q: the error should say how to make a good token: %v", v, err)
		}
	}
}
