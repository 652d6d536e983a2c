package client

import (
	"strings"
	"testing"

	"github.com/termd/termd/internal/testpki"
)

// A tls:// target without its files, or without a port, is refused at Dial
// with words that say which flag to pass; with its files it dials lazily.
func TestDialTLSNeedsFilesAndAddress(t *testing.T) {
	if _, err := Dial("tls://127.0.0.1:7443"); err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("a tls:// target without files: %v", err)
	}
	ca := testpki.MustCA("ca")
	cl, err := ca.Client("me")
	if err != nil {
		t.Fatal(err)
	}
	f, err := cl.WriteAll(t.TempDir(), "me", ca)
	if err != nil {
		t.Fatal(err)
	}
	files := &TLS{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}
	if _, err := Dial("tls://127.0.0.1", Options{TLS: files}); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Fatalf("a target without a port: %v", err)
	}
	if _, err := Dial("tls://127.0.0.1:1", Options{TLS: &TLS{CertFile: f.Cert, KeyFile: f.CA, CAFile: f.CA}}); err == nil || !strings.Contains(err.Error(), f.CA) {
		t.Fatalf("a key file that is no key: %v", err)
	}
	c, err := Dial("127.0.0.1:1", Options{TLS: files})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Socket != "tls://127.0.0.1:1" {
		t.Fatalf("target label %q", c.Socket)
	}
}
