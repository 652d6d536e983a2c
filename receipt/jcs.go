package receipt

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of a
// JSON document: object members sorted by the UTF-16 code units of their
// names, no insignificant whitespace, minimal string escaping, and numbers in
// ECMAScript Number.prototype.toString form. Duplicate member names and
// invalid UTF-8 are errors (I-JSON).
func Canonicalize(data []byte) ([]byte, error) {
	return canonicalize(data, nil)
}

// canonicalize is Canonicalize, dropping the named top-level members.
func canonicalize(data []byte, dropTop []string) ([]byte, error) {
	v, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	return writeTree(v, dropTop, len(data))
}

// parseTree parses a whole JSON document strictly (valid UTF-8, no duplicate
// members, nothing after the value) into the tree writeCanonical writes.
func parseTree(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("jcs: input is not valid UTF-8")
	}
	st := parserStacks.Get().(*stacks)
	p := parser{data: data, members: st.members[:0], items: st.items[:0]}
	defer st.put(&p)
	p.skipWS()
	v, err := p.value(0)
	if err != nil {
		return nil, fmt.Errorf("jcs: %w", err)
	}
	p.skipWS()
	if p.pos != len(p.data) {
		return nil, errors.New("jcs: trailing data after JSON value")
	}
	return v, nil
}

// parserStacks keeps parsers' member and element stacks (a receipt's top
// level needs some 60 members) from one parse to the next.
var parserStacks = sync.Pool{New: func() any { return &stacks{members: make([]member, 0, 64), items: make([]any, 0, 16)} }}

type stacks struct {
	members []member
	items   []any
}

// put keeps p's stacks, cleared (the tree p returned is copied out of them),
// unless a large document grew them.
func (st *stacks) put(p *parser) {
	const keep = 1024
	if cap(p.members) > keep || cap(p.items) > keep {
		return
	}
	clear(p.members[:cap(p.members)])
	clear(p.items[:cap(p.items)])
	st.members, st.items = p.members[:0], p.items[:0]
	parserStacks.Put(st)
}

// writeTree writes the canonical form of a parsed tree, dropping the named
// top-level members. sizeHint is the expected output size.
func writeTree(v any, dropTop []string, sizeHint int) ([]byte, error) {
	if len(dropTop) > 0 {
		if m, ok := v.(jsonObject); ok {
			kept := make(jsonObject, 0, len(m))
			for _, mem := range m {
				drop := false
				for _, d := range dropTop {
					if mem.key == d {
						drop = true
					}
				}
				if !drop {
					kept = append(kept, mem)
				}
			}
			v = kept
		}
	}
	var buf bytes.Buffer
	buf.Grow(sizeHint)
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type member struct {
	key string
	val any
}

type jsonObject []member

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		writeString(buf, t)
	case number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			// ParseFloat returns ±Inf with a range error for overflow.
			return fmt.Errorf("jcs: number %s: %w", t, err)
		}
		s, err := FormatNumber(f)
		if err != nil {
			return err
		}
		buf.WriteString(s)
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case jsonObject:
		sorted := t
		if !inOrder(t) {
			sorted = make(jsonObject, len(t))
			copy(sorted, t)
			sortMembers(sorted)
		}
		buf.WriteByte('{')
		for i, m := range sorted {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, m.key)
			buf.WriteByte(':')
			if err := writeCanonical(buf, m.val); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("jcs: unexpected value type %T", v)
	}
	return nil
}

// inOrder reports whether an object's members are in canonical order (a
// tree parsed from canonical bytes, or sorted by sortTree, is written
// without sorting again).
func inOrder(o jsonObject) bool {
	for i := 1; i < len(o); i++ {
		if !lessUTF16(o[i-1].key, o[i].key) {
			return false
		}
	}
	return true
}

func sortMembers(o jsonObject) {
	slices.SortFunc(o, func(a, b member) int {
		switch {
		case lessUTF16(a.key, b.key):
			return -1
		case a.key == b.key:
			return 0
		}
		return 1
	})
}

// sortTree puts every object in v into canonical member order, in place.
func sortTree(v any) {
	switch t := v.(type) {
	case jsonObject:
		if !inOrder(t) {
			sortMembers(t)
		}
		for _, m := range t {
			sortTree(m.val)
		}
	case []any:
		for _, e := range t {
			sortTree(e)
		}
	}
}

// lessUTF16 compares strings by their UTF-16 code units, as RFC 8785 §3.2.3
// requires (this differs from byte order for characters above U+FFFF versus
// U+E000..U+FFFF).
func lessUTF16(a, b string) bool {
	if isASCII(a) && isASCII(b) {
		return a < b
	}
	ua := utf16.Encode([]rune(a))
	ub := utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

const hexDigits = "0123456789abcdef"

// writeString escapes per RFC 8785 §3.2.2.2: only '"', '\\' and control
// characters are escaped; the short forms are used where JSON has them.
func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for i := 0; i < len(s); i++ {
		// A run of bytes that need no escape goes out at once (a receipt
		// holds up to a MiB of output per stream).
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' {
			j++
		}
		buf.WriteString(s[i:j])
		if i = j; i == len(s) {
			break
		}
		c := s[i]
		switch {
		case c == '"':
			buf.WriteString(`\"`)
		case c == '\\':
			buf.WriteString(`\\`)
		case c == '\b':
			buf.WriteString(`\b`)
		case c == '\f':
			buf.WriteString(`\f`)
		case c == '\n':
			buf.WriteString(`\n`)
		case c == '\r':
			buf.WriteString(`\r`)
		case c == '\t':
			buf.WriteString(`\t`)
		default: // c < 0x20
			buf.WriteString(`\u00`)
			buf.WriteByte(hexDigits[c>>4])
			buf.WriteByte(hexDigits[c&0xf])
		}
	}
	buf.WriteByte('"')
}

// FormatNumber formats f as ECMAScript's Number.prototype.toString does
// (ECMA-262 §7.1.12.1), which RFC 8785 §3.2.2.3 adopts. NaN and infinities
// are not JSON and are errors.
func FormatNumber(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", errors.New("jcs: NaN and Infinity are not valid JSON numbers")
	}
	if f == 0 {
		return "0", nil // also -0
	}
	if f < 0 {
		s, err := FormatNumber(-f)
		return "-" + s, err
	}
	// Shortest round-tripping digits, as "d.ddde±x".
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	k := len(digits)
	n := exp + 1 // position of the decimal point relative to the digits
	var b strings.Builder
	switch {
	case k <= n && n <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", n-k))
	case 0 < n && n <= 21:
		b.WriteString(digits[:n])
		b.WriteByte('.')
		b.WriteString(digits[n:])
	case -6 < n && n <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -n))
		b.WriteString(digits)
	default:
		b.WriteByte(digits[0])
		if k > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if n-1 >= 0 {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
		}
		x := n - 1
		if x < 0 {
			x = -x
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String(), nil
}
