package token

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
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

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := New()
	write := func(name, v string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), mode); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(p, mode)
		return p
	}
	if v, err := ReadFile(write("ok", good+"\n", 0o600)); err != nil || v != good {
		t.Errorf("ReadFile of a 0600 file: %q, %v", v, err)
	}
	for name, c := range map[string]struct {
		v    string
		mode os.FileMode
		want string
	}{
		"group":  {good, 0o640, "chmod 600"},
		"others": {good, 0o604, "chmod 600"},
		"weak":   {"short", 0o600, "too weak"},
	} {
		_, err := ReadFile(write(name, c.v, c.mode))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if _, err := ReadFile(write("weak2", "short", 0o600)); !errors.Is(err, ErrWeak) {
		t.Errorf("a weak token's error does not wrap ErrWeak: %v", err)
	}
}
