package receiptstore

// The redactor as it was before the output path was made fast (issue 17
// item 7), kept as a reference: the differential test and
// FuzzRedactMatchesReference check that Redactor gives byte-identical
// output. Do not change it, except to add a rule that redact.go adds too.

import (
	"bytes"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/termd/termd/receipt"
)

type refRule struct {
	name  string
	re    *regexp.Regexp
	group int // submatch to replace; 0 = the whole match
	// need lists literals (in lower case) of which the text must contain one
	// for the refRule to possibly match: a cheap filter before the regexp, so
	// output with no secret-like text streams at memory speed.
	need []string
	// needAll, when set, must also be present.
	needAll string
	// exact: the refRule is case-sensitive and need holds literals of which
	// the match itself contains one exactly, so they are looked for in the
	// text as it is (a much rarer hit than a lower-cased two-letter "gh").
	exact bool
}

// Common secret shapes. Rules that name a key (KEY=value, "password": "...",
// Authorization:) replace only the credential and keep the name, so the
// output still says what was there.
var refRules = []refRule{
	{"authorization", regexp.MustCompile(`(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*("[^"\r\n]*"|'[^'\r\n]*'|[^\r\n"']+)`), 1, []string{"authorization"}, "", false},
	{"json_secret", regexp.MustCompile(`(?i)"[a-z0-9_.\-]*(?:password|passwd|secret|token|api[_-]?key|apikey|private[_-]?key|access[_-]?key|credentials?)"\s*:\s*"((?:[^"\\]|\\.)*)"`), 1, []string{"passw", "secret", "token", "key", "credential"}, `"`, false},
	{"assignment", regexp.MustCompile(`(?i)\b[a-z0-9_.\-]*(?:_key|_token|_secret|_password|_passwd|_pwd|password|passwd|secret|token|apikey)\s*=\s*("[^"]*"|'[^']*'|[^\s"'&;,]+)`), 1, []string{"_key", "token", "secret", "passw", "_pwd", "apikey"}, "=", false},
	{"yaml_password", regexp.MustCompile(`(?i)\b(?:password|passwd)\s*:\s*([^\s"',}]+)`), 1, []string{"passw"}, ":", false},
	{"url_password", regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]*://[^\s/?#@:]*:([^\s/?#@]+)@`), 1, []string{"://"}, "@", false},
	{"aws_access_key", regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`), 0, []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"}, "", true},
	{"github_token", regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255})\b`), 0, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}, "", true},
	{"slack_token", regexp.MustCompile(`\bxox[a-z]-[A-Za-z0-9-]{10,}`), 0, []string{"xox"}, "", true},
	{"sk_key", regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}`), 0, []string{"sk-"}, "", true},
	{"jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`), 0, []string{"eyJ"}, "", true},
}

// mayMatch is the cheap filter: false means the refRule cannot match s (lower
// is s lower-cased, for the case-insensitive refRules).
func (ru refRule) mayMatch(s, lower string) bool {
	t := lower
	if ru.exact {
		t = s
	}
	if ru.needAll != "" && !strings.Contains(t, ru.needAll) {
		return false
	}
	for _, n := range ru.need {
		if strings.Contains(t, n) {
			return true
		}
	}
	return len(ru.need) == 0
}

// refLowerForFilter lower-cases s for the literal filters of the
// case-insensitive refRules, in one pass: ASCII letters byte for byte (the
// filters' literals are ASCII), and the two non-ASCII letters that those
// refRules' case-insensitive matching folds onto ASCII ones (the Kelvin sign
// onto k, the long s onto s) become k and s. Offsets need not line up with
// s: the result is only searched for literals.
func refLowerForFilter(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x84 && s[i+2] == 0xaa: // U+212A
			c, i = 'k', i+2
		case c == 0xc5 && i+1 < len(s) && s[i+1] == 0xbf: // U+017F
			c, i = 's', i+1
		}
		b = append(b, c)
	}
	return string(b)
}

var (
	refPemBegin = regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----`)
	refPemEnd   = regexp.MustCompile(`-----END[A-Z0-9 ]*PRIVATE KEY-----`)
)

// refRedactor removes secrets: configured values (the adviser key, gateway
// tokens, values listed in config) and common secret shapes. It is safe for
// concurrent use.
type refRedactor struct {
	mu      sync.RWMutex
	secrets []string // longest first
}

// newRefRedactor returns a refRedactor that also removes the given values.
func newRefRedactor(secrets ...string) *refRedactor {
	r := &refRedactor{}
	for _, s := range secrets {
		r.AddSecret(s)
	}
	return r
}

// AddSecret adds a value to redact wherever it appears. Values shorter than
// MinSecretLen are ignored.
func (r *refRedactor) AddSecret(s string) {
	if len(s) < MinSecretLen {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, have := range r.secrets {
		if have == s {
			return
		}
	}
	r.secrets = append(r.secrets, s)
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

type refSpan struct{ start, end int }

// spans returns the sorted, merged byte ranges of s to redact.
func (r *refRedactor) spans(s string) []refSpan {
	sp, _ := r.spansGuards(s)
	return sp
}

// spansGuards also returns the whole matches (key and value for key=value
// refRules). A stream must not cut through a guard: the key may be what makes
// the value recognisable.
func (r *refRedactor) spansGuards(s string) (spans, guards []refSpan) {
	var out []refSpan
	// PEM private key blocks; an unterminated one runs to the end.
	for off := 0; off < len(s) && strings.Contains(s, "-----BEGIN"); {
		loc := refPemBegin.FindStringIndex(s[off:])
		if loc == nil {
			break
		}
		start := off + loc[0]
		end := len(s)
		if e := refPemEnd.FindStringIndex(s[off+loc[1]:]); e != nil {
			end = off + loc[1] + e[1]
		}
		out = append(out, refSpan{start, end})
		off = end
	}
	lower := refLowerForFilter(s)
	for _, ru := range refRules {
		if !ru.mayMatch(s, lower) {
			continue
		}
		for _, m := range ru.re.FindAllStringSubmatchIndex(s, -1) {
			a, b := m[2*ru.group], m[2*ru.group+1]
			if a >= 0 && b > a {
				out = append(out, refSpan{a, b})
				if ru.group != 0 {
					guards = append(guards, refSpan{m[0], m[1]})
				}
			}
		}
	}
	r.mu.RLock()
	for _, sec := range r.secrets {
		for off := 0; ; {
			i := strings.Index(s[off:], sec)
			if i < 0 {
				break
			}
			out = append(out, refSpan{off + i, off + i + len(sec)})
			off += i + 1
		}
	}
	r.mu.RUnlock()
	if len(out) == 0 {
		return nil, nil
	}
	guards = append(guards, out...)
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	merged := out[:1]
	for _, sp := range out[1:] {
		last := &merged[len(merged)-1]
		if sp.start < last.end {
			if sp.end > last.end {
				last.end = sp.end
			}
			continue
		}
		merged = append(merged, sp)
	}
	return merged, guards
}

// refApply writes s[:limit] with every refSpan (clipped to limit) replaced.
func refApply(b *strings.Builder, s string, spans []refSpan, limit int) {
	pos := 0
	for _, sp := range spans {
		if sp.start >= limit {
			break
		}
		b.WriteString(s[pos:sp.start])
		b.WriteString(Redacted)
		pos = min(sp.end, limit)
	}
	if pos < limit {
		b.WriteString(s[pos:limit])
	}
}

// Redact returns s with every secret replaced by [REDACTED].
func (r *refRedactor) Redact(s string) string {
	sp := r.spans(s)
	if len(sp) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	refApply(&b, s, sp, len(s))
	return b.String()
}

// RedactAll redacts every element of ss in place and returns it.
func (r *refRedactor) RedactAll(ss []string) []string {
	for i := range ss {
		ss[i] = r.Redact(ss[i])
	}
	return ss
}

// RedactReceipt redacts the free-text fields of a receipt in place: command,
// argv, reasons, cwd, detail, stdout and stderr. Digests are left alone (they
// are keyed and were computed over the full streams).
func (r *refRedactor) RedactReceipt(rc *receipt.Receipt) {
	rc.Command = r.Redact(rc.Command)
	rc.Cwd = r.Redact(rc.Cwd)
	rc.Detail = r.Redact(rc.Detail)
	rc.Stdout = r.Redact(rc.Stdout)
	rc.Stderr = r.Redact(rc.Stderr)
	r.RedactAll(rc.Policy.Argv)
	r.RedactAll(rc.Policy.Reasons)
}

// refStreamRedactor redacts a byte stream chunk by chunk for live output. It
// holds back the last Hold bytes (more while a match runs through the tail)
// so a secret split across Write calls is still caught; PEM private key
// blocks of any length are swallowed whole. Call Close to flush the tail.
// Not safe for concurrent use.
type refStreamRedactor struct {
	r     *refRedactor
	w     io.Writer
	hold  int
	buf   []byte
	inPEM bool
	cont  bool // a forced cut split a secret: drop its continuation
}

// NewStream returns a refStreamRedactor writing redacted output to w. hold <= 0
// means DefaultHold.
func (r *refRedactor) NewStream(w io.Writer, hold int) *refStreamRedactor {
	if hold <= 0 {
		hold = DefaultHold
	}
	return &refStreamRedactor{r: r, w: w, hold: hold}
}

// Write buffers p and writes out whatever can no longer be part of a secret.
func (s *refStreamRedactor) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	return len(p), s.drain(false)
}

// Close redacts and writes the held tail. It does not close the writer.
func (s *refStreamRedactor) Close() error { return s.drain(true) }

// Flush is Close: it writes out the held tail; the stream can go on after.
func (s *refStreamRedactor) Flush() error { return s.drain(true) }

// FlushLines writes out the held tail up to its last newline, for output
// that paused: complete lines go out now, while a line still being written
// (which may be the first part of a secret, "password=" …) waits for the
// rest of it.
func (s *refStreamRedactor) FlushLines() error {
	i := bytes.LastIndexByte(s.buf, '\n')
	if i < 0 {
		return nil
	}
	rest := append([]byte(nil), s.buf[i+1:]...)
	s.buf = s.buf[:i+1]
	err := s.drain(true)
	s.buf = append(s.buf, rest...)
	return err
}

func (s *refStreamRedactor) emit(str string) error {
	if str == "" {
		return nil
	}
	_, err := io.WriteString(s.w, str)
	return err
}

func (s *refStreamRedactor) keep(from int) {
	s.buf = append(s.buf[:0], s.buf[from:]...)
}

func (s *refStreamRedactor) drain(final bool) error {
	for {
		if s.cont {
			i := 0
			for i < len(s.buf) && !refIsSpace(s.buf[i]) {
				i++
			}
			s.keep(i)
			if i < len(s.buf) || final {
				s.cont = false
			}
			if len(s.buf) == 0 {
				return nil
			}
		}
		if s.inPEM {
			if loc := refPemEnd.FindIndex(s.buf); loc != nil {
				s.keep(loc[1])
				s.inPEM = false
				continue
			}
			if final {
				s.buf = s.buf[:0]
				return nil
			}
			if tail := 64; len(s.buf) > tail { // may hold a partial END line
				s.keep(len(s.buf) - tail)
			}
			return nil
		}
		str := string(s.buf)
		var loc []int
		if strings.Contains(str, "-----BEGIN") { // cheap test before the block scan
			loc = refPemBegin.FindStringIndex(str)
		}
		if loc != nil && refPemEnd.FindStringIndex(str[loc[1]:]) == nil {
			if err := s.emit(s.r.Redact(str[:loc[0]])); err != nil {
				return err
			}
			if err := s.emit(Redacted); err != nil {
				return err
			}
			s.keep(loc[1])
			s.inPEM = true
			continue
		}
		spans, guards := s.r.spansGuards(str)
		var b strings.Builder
		if final {
			refApply(&b, str, spans, len(str))
			s.buf = s.buf[:0]
			return s.emit(b.String())
		}
		cut := len(str) - s.hold
		if cut <= 0 {
			return nil
		}
		// Move the cut back before any match that runs through it.
		for moved := true; moved; {
			moved = false
			for _, g := range guards {
				if g.start < cut && g.end > cut {
					cut = g.start
					moved = true
				}
			}
		}
		next := cut
		if cut <= 0 {
			if len(str) < 4*s.hold {
				return nil // wait for the match to end
			}
			// A match longer than the buffer bound: emit it (redacted) and
			// drop what we have of it; if it reaches the end of the buffer,
			// drop its continuation too.
			for _, g := range guards {
				if g.start == 0 && g.end > cut {
					cut = g.end
				}
			}
			next = cut
			if cut == len(str) {
				s.cont = true
			}
		}
		refApply(&b, str, spans, cut)
		s.keep(next)
		return s.emit(b.String())
	}
}

func refIsSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}
