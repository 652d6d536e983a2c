package receipt

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// Examples from RFC 8785 §3.2.2 (number and string serialization) and
// §3.2.3 (member sorting by UTF-16 code units).
func TestCanonicalizeRFC8785Examples(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{
			"serialization",
			`{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			"sorting",
			`{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{"nested and whitespace", " { \"b\" : [ 1 , { \"z\":1,\"a\":2 } ] , \"a\" : {} } ", `{"a":{},"b":[1,{"a":2,"z":1}]}`},
		{"no html escaping", `{"x":"<a&b>"}`, `{"x":"<a&b>"}`},
	}
	for _, c := range cases {
		got, err := Canonicalize([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// ECMAScript number formatting, including the boundary cases listed in
// RFC 8785 Appendix B.
func TestFormatNumberES6(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{math.Float64frombits(0x0000000000000001), "5e-324"},
		{math.Float64frombits(0x8000000000000001), "-5e-324"},
		{math.Float64frombits(0x7fefffffffffffff), "1.7976931348623157e+308"},
		{math.Float64frombits(0x4340000000000000), "9007199254740992"},
		{math.Float64frombits(0xc340000000000000), "-9007199254740992"},
		{math.Float64frombits(0x4430000000000000), "295147905179352830000"},
		{math.Float64frombits(0x44b52d02c7e14af5), "9.999999999999997e+22"},
		{math.Float64frombits(0x44b52d02c7e14af6), "1e+23"},
		{math.Float64frombits(0x3eb0c6f7a0b5ed8d), "0.000001"},
		{math.Float64frombits(0x3eb0c6f7a0b5ed8c), "9.999999999999997e-7"},
		{1e21, "1e+21"},
		{1e20, "100000000000000000000"},
		{1e-7, "1e-7"},
		{123e-20, "1.23e-18"},
		{42, "42"},
		{-1.5, "-1.5"},
		{1234567890123, "1234567890123"},
	}
	for _, c := range cases {
		got, err := FormatNumber(c.f)
		if err != nil || got != c.want {
			t.Errorf("FormatNumber(%v) = %q, %v; want %q", c.f, got, err, c.want)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := FormatNumber(bad); err == nil {
			t.Errorf("FormatNumber(%v) accepted", bad)
		}
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`,                        // duplicate member
		`{"a":1} {"b":2}`,                      // trailing value
		"{\"a\":\"\xff\"}",                     // invalid UTF-8
		`{"a":1e400}`,                          // not a finite double
		`{"a":}`,                               // not JSON
		`{"a":"\ud800"}`,                       // lone surrogate
		`{"a":"\udc00x"}`,                      // lone low surrogate
		`[01]`, `[1.]`, `[.5]`, `[1e]`, `[+1]`, // number grammar
		"[\"tab\there\"]", // raw control character
		`{"a":1,}`, `[1,]`, `[tru]`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100), // too deep
	} {
		if out, err := Canonicalize([]byte(in)); err == nil {
			t.Errorf("Canonicalize(%q) = %s, want error", in, out)
		}
	}
}

// TestCanonicalizeDuplicatesAnySize: a duplicate member name is refused
// wherever it is in an object of any size (names are compared one by one in
// small objects and through a map in large ones), while the same names in a
// nested object or array, or in a sibling object, are not duplicates.
func TestCanonicalizeDuplicatesAnySize(t *testing.T) {
	obj := func(names []string, nested string) string {
		var b strings.Builder
		b.WriteByte('{')
		for i, n := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%d", n, i)
			if nested != "" && i == len(names)/2 {
				fmt.Fprintf(&b, `,"nested":[%s,%s]`, nested, nested)
			}
		}
		b.WriteByte('}')
		return b.String()
	}
	for _, n := range []int{2, 3, 15, 16, 17, 63, 64, 65, 66, 150} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("k%03d", i)
		}
		inner := obj(names, "")
		for _, in := range []string{obj(names, ""), obj(names, inner), obj(names[:1], inner), obj(names, obj(names[:1], ""))} {
			if _, err := Canonicalize([]byte(in)); err != nil {
				t.Fatalf("%d members: %v\n%s", n, err, in)
			}
		}
		for _, at := range [][2]int{{0, 1}, {0, n - 1}, {n / 2, n - 1}, {n - 2, n - 1}} {
			if at[0] == at[1] {
				continue
			}
			dup := append([]string(nil), names...)
			dup[at[1]] = dup[at[0]]
			for _, in := range []string{obj(dup, ""), obj(names, obj(dup, "")), obj(dup[:1], obj(dup, ""))} {
				if _, err := Canonicalize([]byte(in)); err == nil || !strings.Contains(err.Error(), "duplicate member") {
					t.Fatalf("%d members, %q at %d and %d: err %v, want a duplicate member\n%s", n, dup[at[0]], at[0], at[1], err, in)
				}
			}
		}
	}
}

// TestCanonicalizeStringRuns: strings made of runs of plain text, escapes
// and control bytes (as a receipt's output is) come out escaped byte by
// byte per RFC 8785, whatever the run lengths, whether the input spelled
// them with escapes or \u forms.
func TestCanonicalizeStringRuns(t *testing.T) {
	pieces := []string{"a", "plain text ", "€", "\"", "\\", "\n", "\r\n", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "/"}
	want := func(s string) string { // the escaping, one byte at a time
		var b strings.Builder
		b.WriteByte('"')
		for i := 0; i < len(s); i++ {
			switch c := s[i]; c {
			case '"', '\\':
				b.WriteString(`\` + string(c))
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				if c < 0x20 {
					fmt.Fprintf(&b, `\u%04x`, c)
				} else {
					b.WriteByte(c)
				}
			}
		}
		b.WriteByte('"')
		return b.String()
	}
	rng := rand.New(rand.NewSource(5))
	for range 2000 {
		var s strings.Builder
		for n := rng.Intn(12); n >= 0; n-- {
			s.WriteString(strings.Repeat(pieces[rng.Intn(len(pieces))], 1+rng.Intn(3)))
		}
		for _, in := range []string{mustJSON(t, s.String()), strings.ReplaceAll(mustJSON(t, s.String()), `\n`, `\u000a`)} {
			got, err := Canonicalize([]byte(in))
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", in, err)
			}
			if string(got) != want(s.String()) {
				t.Fatalf("Canonicalize(%s) = %s, want %s", in, got, want(s.String()))
			}
		}
	}
}

func mustJSON(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
