package receiptstore

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// diffPieces are the fragments the differential inputs are built from: a
// secret of every rule (keys in varied case, with the Kelvin sign and the
// long s that case-insensitive matching folds onto k and s), near misses,
// PEM blocks, the configured secret, and the text around them.
var diffPieces = []string{
	"Authorization: Bearer abc.def-123", "proxy-authorization='x y'", "AUTHORIZATION=\"q\"", "authorization",
	`{"password": "p\"ss w"}`, `"api_key":"k-1234567"`, `"Private-Key" : "z"`, `"credentials":"c"`, `"token"`,
	"OPENAI_API_KEY=abc123xyz", "GH_TOKEN=\"tok en\"", "db_pwd='x'", "Password=hunter22", "ApiKey=v;", "my_secret=", "_key",
	"password: hunter2x", "PASSWD:x", "pa\u017fsword=long-s", "api\u212aey=kelvin", "\u212a", "\u017f", "_\u212aEY=x",
	"AKIA" + "ABCDEFGHIJKLMNOP", "ASIA" + "0123456789ABCDEF", "AKIA" + "abc", "AKIA",
	"ghp_" + strings.Repeat("a1B2", 6), "github_pat_" + strings.Repeat("11AB_cd", 4), "ghs_short", "gho_",
	"xoxb-" + "1234567890-abc", "xox", "sk-" + strings.Repeat("0f9e", 5), "sk-", "SK-" + strings.Repeat("a", 20),
	"eyJhbGciOi.eyJzdWIiOi.c2ln", "eyJ", "eyJabcde.fghij",
	"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "-----BEGIN OPENSSH PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "-----BEGIN",
	"configured-secret-value", "configured",
	" ", "  ", "\n", "\r\n", "\t", "=", ":", "\"", "'", ",", ";", "&", "}", ".", "-", "_", "/", "+", "\xff", "\xe2\x84", "\xc5",
}

const diffAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.:/+="

func diffInput(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.Intn(40); n >= 0; n-- {
		if rng.Intn(3) == 0 {
			for k := rng.Intn(30); k >= 0; k-- {
				b.WriteByte(diffAlphabet[rng.Intn(len(diffAlphabet))])
			}
			continue
		}
		p := diffPieces[rng.Intn(len(diffPieces))]
		if rng.Intn(4) == 0 { // case variation
			bs := []byte(p)
			for i := range bs {
				if c := bs[i]; rng.Intn(2) == 0 && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
					bs[i] = c ^ 0x20
				}
			}
			p = string(bs)
		}
		b.WriteString(p)
	}
	return b.String()
}

// checkSameAsReference fails t when Redactor and the reference redactor
// differ on s, whole or streamed in pieces cut at the given points with the
// given hold (and FlushLines calls at the cuts marked by flush).
func checkSameAsReference(t *testing.T, s string, cuts []int, hold int, flush []bool) {
	t.Helper()
	const sec = "configured-secret-value"
	r, ref := NewRedactor(sec), newRefRedactor(sec)
	if got, want := r.Redact(s), ref.Redact(s); got != want {
		t.Fatalf("Redact(%q)\n got %q\nwant %q", s, got, want)
	}
	var got, want bytes.Buffer
	gs, ws := r.NewStream(&got, hold), ref.NewStream(&want, hold)
	prev := 0
	for i, c := range cuts {
		c = min(max(c, prev), len(s))
		_, _ = gs.Write([]byte(s[prev:c]))
		_, _ = ws.Write([]byte(s[prev:c]))
		if i < len(flush) && flush[i] {
			_ = gs.FlushLines()
			_ = ws.FlushLines()
		}
		prev = c
	}
	_, _ = gs.Write([]byte(s[prev:]))
	_, _ = ws.Write([]byte(s[prev:]))
	_ = gs.Close()
	_ = ws.Close()
	if got.String() != want.String() {
		t.Fatalf("stream (hold %d, cuts %v, flush %v) of %q\n got %q\nwant %q", hold, cuts, flush, s, got.String(), want.String())
	}
}

func TestRedactMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	n := 20000
	if testing.Short() || raceDetector {
		n = 3000 // several times slower under -race; the fuzzer goes further
	}
	for i := 0; i < n; i++ {
		s := diffInput(rng)
		var cuts []int
		var flush []bool
		for k := rng.Intn(6); k > 0; k-- {
			cuts = append(cuts, rng.Intn(len(s)+1))
			flush = append(flush, rng.Intn(4) == 0)
		}
		sortInts(cuts)
		checkSameAsReference(t, s, cuts, []int{1, 8, 24, 64, 4096}[rng.Intn(5)], flush)
	}
	// The benchmark's shapes, large, through the default hold.
	for kind, data := range benchInputs(1 << 20) {
		s := string(data)
		if got, want := NewRedactor().Redact(s), newRefRedactor().Redact(s); got != want {
			t.Fatalf("%s: Redact differs from the reference", kind)
		}
		var cuts []int
		for c := 0; c < len(s); c += 64 << 10 {
			cuts = append(cuts, c)
		}
		checkSameAsReference(t, s, cuts, 0, nil)
	}
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

func FuzzRedactMatchesReference(f *testing.F) {
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 32; i++ {
		f.Add(diffInput(rng), uint16(rng.Intn(1<<16)), uint16(rng.Intn(1<<16)), uint8(rng.Intn(256)))
	}
	f.Fuzz(func(t *testing.T, s string, cut1, cut2 uint16, hold uint8) {
		cuts := []int{int(cut1) % (len(s) + 1), int(cut2) % (len(s) + 1)}
		sortInts(cuts)
		checkSameAsReference(t, s, cuts, int(hold%64)+1, []bool{cut1&1 == 1, cut2&1 == 1})
		checkScanPieces(t, s)
	})
}

// checkScanPieces fails t when the filter scan of s cut into pieces walked
// side by side (as texts of 4 KiB and more are) finds other literals, first
// ends or exact hits than one sequential walk.
func checkScanPieces(t *testing.T, s string) {
	t.Helper()
	var split, seq litHits
	foldedLits.scanSplit(s, &split, 0)
	foldedLits.walk(s, 0, 0, len(s), &seq)
	if split.found != seq.found {
		t.Fatalf("scan of %q in pieces found %b, sequentially %b", s, split.found, seq.found)
	}
	for b := range 64 {
		if seq.found&(1<<b) != 0 && split.firstEnd[b] != seq.firstEnd[b] {
			t.Fatalf("scan of %q in pieces: literal %d first ends at %d, sequentially at %d", s, b, split.firstEnd[b], seq.firstEnd[b])
		}
	}
	if fmt.Sprint(split.exact) != fmt.Sprint(seq.exact) {
		t.Fatalf("scan of %q in pieces: exact hits %v, sequentially %v", s, split.exact, seq.exact)
	}
}

// TestScanPiecesMatchWalk: the filter scan in pieces is the sequential
// walk, for generated texts (literals in varied case, the Kelvin sign and
// the long s, broken UTF-8) of every length around the piece boundaries.
func TestScanPiecesMatchWalk(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	n := 20000
	if testing.Short() || raceDetector {
		n = 3000
	}
	for range n {
		checkScanPieces(t, diffInput(rng))
	}
	// Literals straddling each piece boundary of a text just long enough
	// to be split by scan itself.
	for _, lit := range []string{"api\u212aey", "pa\u017fsword", "\u212a", "ghp_", "github_pat_", "authorization", "AKIA"} {
		for shift := -16; shift <= 16; shift++ {
			b := []byte(strings.Repeat("x", scanSplitMin))
			for j := 1; j < scanChains; j++ {
				at := len(b)/scanChains*j + shift
				copy(b[at:], lit)
			}
			checkScanPieces(t, string(b))
			var h litHits
			foldedLits.scan(string(b), &h)
			var seq litHits
			foldedLits.walk(string(b), 0, 0, len(b), &seq)
			if h.found != seq.found || fmt.Sprint(h.exact) != fmt.Sprint(seq.exact) {
				t.Fatalf("scan of a %d-byte text with %q at the piece boundaries %+d differs from the walk", len(b), lit, shift)
			}
		}
	}
}
