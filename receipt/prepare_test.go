package receipt

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"
)

// A prepared receipt sealed at (seq, prev) is byte for byte the receipt
// signed at that place the plain way, verifies, and a receipt the schema
// refuses is refused by Prepare, before any place in the chain is taken.
func TestPreparedSealsLikeSign(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	s := Signer{KeyID: KeyIDFor(priv.Public().(ed25519.PublicKey)), Ed25519: priv, HMAC: bytes.Repeat([]byte{7}, 32)}
	mk := func() *Receipt {
		return &Receipt{
			SchemaVersion: SchemaVersion, ID: "r-1", SessionID: "s", PlanID: "p", ExecutionID: "e",
			Status: "succeeded", Command: "echo hi", Cwd: "/tmp", StartedAt: time.Unix(1700000000, 0).UTC(), FinishedAt: time.Unix(1700000001, 0).UTC(),
		}
	}
	prev := strings.Repeat("ab", 32)
	want := mk()
	want.Seq, want.PrevHash = 7, prev
	if err := s.Sign(want); err != nil {
		t.Fatal(err)
	}
	wantBody, err := CanonicalBytes(want)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Prepare(mk(), false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Seal(7, prev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantBody) {
		t.Fatalf("sealed:\n%s\nsigned:\n%s", got, wantBody)
	}
	if r := p.Receipt(); r.Signature != want.Signature || r.SignatureEd25519 != want.SignatureEd25519 || r.Seq != 7 || r.PrevHash != prev {
		t.Fatalf("sealed receipt fields: %+v", r)
	}
	// Seal writes the receipt once (sealOnce) for every receipt Prepare
	// makes; the two-write path is only the fallback.
	p2, err := s.Prepare(testReceipt(), true)
	if err != nil {
		t.Fatal(err)
	}
	p2.r.Seq, p2.r.PrevHash = 7, prev
	setMember(&p2.obj, "seq", number("7"))
	setMember(&p2.obj, "prev_hash", prev)
	once, ok, err := p2.sealOnce()
	if err != nil || !ok {
		t.Fatalf("sealOnce: ok %v, %v", ok, err)
	}
	plain := testReceipt()
	plain.Seq, plain.PrevHash = 7, prev
	if err := s.Sign(plain); err != nil {
		t.Fatal(err)
	}
	if b, _ := CanonicalBytes(plain); !bytes.Equal(once, b) {
		t.Fatalf("sealed once:\n%s\nsigned:\n%s", once, b)
	}
	bad := mk()
	bad.Status = "no-such-status"
	if _, err := s.Prepare(bad, true); err == nil {
		t.Fatal("Prepare with validate accepted a receipt the schema refuses")
	}
}

// BenchmarkPrepareSeal is the receipt's CPU in the store's append, outside
// SQLite: encode and schema-check (Prepare), then place and sign (Seal).
func BenchmarkPrepareSeal(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	s := Signer{KeyID: KeyIDFor(priv.Public().(ed25519.PublicKey)), Ed25519: priv, HMAC: bytes.Repeat([]byte{7}, 32)}
	prev := strings.Repeat("ab", 32)
	for b.Loop() {
		p, err := s.Prepare(testReceipt(), true)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Seal(7, prev); err != nil {
			b.Fatal(err)
		}
	}
}
