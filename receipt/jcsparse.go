package receipt

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// number is a JSON number literal as it appeared in the input.
type number string

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 64

// parser is a small strict JSON (RFC 8259) parser that keeps member order
// and reports duplicates; it is what Canonicalize runs on.
type parser struct {
	data    []byte
	pos     int
	members []member // the open objects' members so far
	items   []any    // the open arrays' elements so far
}

func (p *parser) skipWS() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) errf(format string, a ...any) error {
	return fmt.Errorf("offset %d: "+format, append([]any{p.pos}, a...)...)
}

func (p *parser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.errf("nesting deeper than %d", maxDepth)
	}
	if p.pos >= len(p.data) {
		return nil, p.errf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.num()
	default:
		for _, lit := range []struct {
			s string
			v any
		}{{"true", true}, {"false", false}, {"null", nil}} {
			if len(p.data)-p.pos >= len(lit.s) && string(p.data[p.pos:p.pos+len(lit.s)]) == lit.s {
				p.pos += len(lit.s)
				return lit.v, nil
			}
		}
		return nil, p.errf("unexpected character %q", c)
	}
}

func (p *parser) object(depth int) (any, error) {
	p.pos++ // {
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return jsonObject{}, nil
	}
	// The members gather on p.members (nested objects' above them, gone
	// when those return) and are copied out once, at their exact count.
	base := len(p.members)
	defer func() { p.members = p.members[:base] }()
	var seen map[string]struct{} // past dupScan members
	for {
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errf("expected member name")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		dup, m := duplicate(p.members[base:], seen, k)
		if dup {
			return nil, fmt.Errorf("duplicate member %q", k)
		}
		seen = m
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errf("expected ':'")
		}
		p.pos++
		p.skipWS()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.members = append(p.members, member{k, v})
		p.skipWS()
		if p.pos >= len(p.data) {
			return nil, p.errf("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return append(make(jsonObject, 0, len(p.members)-base), p.members[base:]...), nil
		default:
			return nil, p.errf("expected ',' or '}'")
		}
	}
}

// dupScan is how many members an object's names are compared with one by
// one; a larger object's names go into a map.
const dupScan = 64

// duplicate reports whether name k is among an object's members so far,
// and returns the map of their names once there are more than dupScan.
func duplicate(members []member, seen map[string]struct{}, k string) (bool, map[string]struct{}) {
	if seen == nil && len(members) < dupScan {
		for _, m := range members {
			if m.key == k {
				return true, nil
			}
		}
		return false, nil
	}
	if seen == nil {
		seen = make(map[string]struct{}, 4*dupScan)
		for _, m := range members {
			seen[m.key] = struct{}{}
		}
	}
	if _, dup := seen[k]; dup {
		return true, seen
	}
	seen[k] = struct{}{}
	return false, seen
}

func (p *parser) array(depth int) (any, error) {
	p.pos++ // [
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return []any{}, nil
	}
	base := len(p.items) // as object's p.members
	defer func() { p.items = p.items[:base] }()
	for {
		p.skipWS()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.items = append(p.items, v)
		p.skipWS()
		if p.pos >= len(p.data) {
			return nil, p.errf("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return append(make([]any, 0, len(p.items)-base), p.items[base:]...), nil
		default:
			return nil, p.errf("expected ',' or ']'")
		}
	}
}

func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errf("control character in string")
		}
		p.pos++
	}
	buf := append([]byte(nil), p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.errf("control character in string")
		case c != '\\':
			// Copy the run up to the next quote, escape or control byte.
			j := p.pos + 1
			for j < len(p.data) && p.data[j] != '"' && p.data[j] != '\\' && p.data[j] >= 0x20 {
				j++
			}
			buf = append(buf, p.data[p.pos:j]...)
			p.pos = j
			continue
		}
		if p.pos+1 >= len(p.data) {
			break
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate must be followed by a low one; lone
				// surrogates are not valid I-JSON strings.
				if r >= 0xDC00 || p.pos+6 > len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
					return "", p.errf("lone surrogate in string")
				}
				p.pos += 2
				r2, err := p.hex4()
				if err != nil {
					return "", err
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return "", p.errf("invalid surrogate pair in string")
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.errf("invalid escape \\%c", e)
		}
	}
	return "", errors.New("unterminated string")
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, p.errf("bad \\u escape")
	}
	p.pos += 4
	return rune(v), nil
}

// num checks the RFC 8259 number grammar.
func (p *parser) num() (any, error) {
	start := p.pos
	d := p.data
	if p.pos < len(d) && d[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.pos < len(d) && d[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return nil, p.errf("invalid number")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.errf("invalid number")
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.errf("invalid number")
		}
	}
	return number(d[start:p.pos]), nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
