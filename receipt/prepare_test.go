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

// SignIndented, which encodes the receipt once, gives exactly Sign then
// IndentedJSON (what ExportReceipt sends), for receipts of every shape,
// signed before or not, and what it gives verifies.
func TestSignIndentedIsSignThenIndentedJSON(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	s := Signer{KeyID: KeyIDFor(pub), Ed25519: priv, HMAC: bytes.Repeat([]byte{7}, 32)}
	shapes := map[string]func(*Receipt){
		"plain": func(*Receipt) {},
		"escapes": func(r *Receipt) {
			r.Stdout, r.Stderr = "<a href=\"x\">&amp;</a>\u2028 \x01 é \U0001F600", "tab\there\n"
			r.Detail = "quote \" backslash \\"
		},
		"signed before": func(r *Receipt) {
			r.KeyID, r.Signature, r.SignatureEd25519 = "old", strings.Repeat("f", 64), strings.Repeat("e", 128)
		},
		"terminal and sandbox": func(r *Receipt) {
			r.Terminal = &Terminal{Rows: 24, Cols: 80, Inputs: []TerminalInput{{Seq: 1, At: time.Unix(1700000000, 5).In(time.FixedZone("x", 3600)), By: "u", Kind: "input", Text: "ls<Enter>", SHA256: strings.Repeat("1", 64)}}}
			r.Sandbox = &Sandbox{Profile: "workspace-write", Level: "full", Mode: "required", Seccomp: true}
		},
	}
	for name, shape := range shapes {
		a, b := testReceipt(), testReceipt()
		shape(a)
		shape(b)
		if err := s.Sign(a); err != nil {
			t.Fatal(err)
		}
		want, err := IndentedJSON(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.SignIndented(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: SignIndented:\n%s\nSign then IndentedJSON:\n%s", name, got, want)
		}
		if b.Signature != a.Signature || b.SignatureEd25519 != a.SignatureEd25519 || b.KeyID != s.KeyID {
			t.Fatalf("%s: SignIndented left the receipt signed %q %q %q, Sign %q %q", name, b.KeyID, b.Signature, b.SignatureEd25519, a.Signature, a.SignatureEd25519)
		}
		if _, err := VerifyJSON(got, map[string]ed25519.PublicKey{s.KeyID: pub}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
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
