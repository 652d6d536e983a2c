package receiptstore

import (
	"bytes"
	"io"
	mathbits "math/bits"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/termd/termd/receipt"
)

// Redacted replaces a secret in redacted text.
const Redacted = "[REDACTED]"

// MinSecretLen is the shortest configured secret value that is redacted;
// shorter values would blank out ordinary text and are ignored.
const MinSecretLen = 4

type rule struct {
	name  string
	re    *regexp.Regexp
	group int // submatch to replace; 0 = the whole match
	// need lists literals (in lower case) of which the text must contain one
	// for the rule to possibly match: a cheap filter before the regexp, so
	// output with no secret-like text streams at memory speed.
	need []string
	// needAll, when set, must also be present.
	needAll string
	// exact: the rule is case-sensitive and need holds literals of which
	// the match itself contains one exactly, so they are looked for in the
	// text as it is (a much rarer hit than a lower-cased two-letter "gh").
	exact bool
}

// Common secret shapes. Rules that name a key (KEY=value, "password": "...",
// Authorization:) replace only the credential and keep the name, so the
// output still says what was there.
var rules = []rule{
	{"authorization", regexp.MustCompile(`(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*("[^"\r\n]*"|'[^'\r\n]*'|[^\r\n"']+)`), 1, []string{"authorization"}, "", false},
	{"json_secret", regexp.MustCompile(`(?i)"[a-z0-9_.\-]*(?:password|passwd|secret|token|api[_-]?key|apikey|private[_-]?key|access[_-]?key|credentials?)"\s*:\s*"((?:[^"\\]|\\.)*)"`), 1, []string{"passw", "secret", "token", "key", "credential"}, `"`, false},
	{"assignment", regexp.MustCompile(`(?i)\b[a-z0-9_.\-]*(?:_key|_token|_secret|_password|_passwd|_pwd|password|passwd|secret|token|apikey)\s*=\s*("[^"]*"|'[^']*'|[^\s"'&;,]+)`), 1, []string{"_key", "token", "secret", "passw", "_pwd", "apikey"}, "=", false},
	{"yaml_password", regexp.MustCompile(`(?i)\b(?:password|passwd)\s*:\s*([^\s"',}]+)`), 1, []string{"passw"}, ":", false},
	{"aws_access_key", regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`), 0, []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"}, "", true},
	{"github_token", regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255})\b`), 0, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}, "", true},
	{"slack_token", regexp.MustCompile(`\bxox[a-z]-[A-Za-z0-9-]{10,}`), 0, []string{"xox"}, "", true},
	{"sk_key", regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}`), 0, []string{"sk-"}, "", true},
	{"jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`), 0, []string{"eyJ"}, "", true},
}

// foldedLits is one automaton over every literal of the case-insensitive
// rules' filters (need and needAll): a single pass over the text, folding it
// byte by byte as the filter always has, says which of them occur, instead
// of lower-casing a copy of each chunk and searching it once per literal.
var foldedLits = newFoldScanner(rules)

// ruleMasks holds, per rule, the automaton's bits for need and needAll.
type ruleMasks struct{ need, needAll uint64 }

// mayMatchFolded is the cheap filter of a case-insensitive rule: false
// means the rule cannot match a text in which only the literals in found
// (bits of foldedLits) occur.
func (m ruleMasks) mayMatchFolded(found uint64) bool {
	if m.needAll != 0 && found&m.needAll == 0 {
		return false
	}
	return m.need == 0 || found&m.need != 0
}

// foldScanner is an Aho–Corasick automaton (as a full transition table)
// over lower-case ASCII literals.
type foldScanner struct {
	next  [][256]uint8
	out   []uint64 // literals that end in each state
	masks []ruleMasks
	// exact marks the literals of exact rules, which the scan checks
	// byte for byte at every hit; lits holds them as written and ruleOf
	// their rule.
	exact  uint64
	lits   [64]string
	ruleOf [64]int
}

func newFoldScanner(rs []rule) *foldScanner {
	f := &foldScanner{next: make([][256]uint8, 1), out: make([]uint64, 1), masks: make([]ruleMasks, len(rs))}
	bits := map[string]uint64{}
	add := func(key, lit string) uint64 {
		if b, ok := bits[key]; ok {
			return b
		}
		if len(bits) == 64 {
			panic("receiptstore: too many filter literals")
		}
		bit := uint64(1) << len(bits)
		bits[key] = bit
		st := 0
		for i := 0; i < len(lit); i++ {
			c := lit[i]
			if f.next[st][c] == 0 {
				f.next = append(f.next, [256]uint8{})
				f.out = append(f.out, 0)
				if len(f.next) > 255 {
					panic("receiptstore: filter literals too long")
				}
				f.next[st][c] = uint8(len(f.next) - 1)
			}
			st = int(f.next[st][c])
		}
		f.out[st] |= bit
		return bit
	}
	for i, ru := range rs {
		if ru.exact {
			// The trie is over lower-case text, so an exact literal is
			// entered lower-cased and each hit compared as written.
			for _, n := range ru.need {
				bit := add("exact\x00"+n, strings.ToLower(n))
				f.exact |= bit
				f.lits[mathbits.TrailingZeros64(bit)] = n
				f.ruleOf[mathbits.TrailingZeros64(bit)] = i
			}
			continue
		}
		for _, n := range ru.need {
			f.masks[i].need |= add(n, n)
		}
		if ru.needAll != "" {
			f.masks[i].needAll = add(ru.needAll, ru.needAll)
		}
	}
	// Breadth first: fail links, then every missing edge follows the fail
	// link's edge, so the scan is one table lookup per byte.
	fail := make([]int, len(f.next))
	queue := []int{}
	for c := 0; c < 256; c++ {
		if t := int(f.next[0][c]); t != 0 {
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		f.out[st] |= f.out[fail[st]]
		for c := 0; c < 256; c++ {
			t := int(f.next[st][c])
			if t == 0 {
				f.next[st][c] = f.next[fail[st]][c]
				continue
			}
			fail[t] = int(f.next[fail[st]][c])
			queue = append(queue, t)
		}
	}
	// The literals are lower case: an upper-case letter moves as its
	// lower-case one, so the scan folds ASCII without a branch.
	for st := range f.next {
		for c := 'A'; c <= 'Z'; c++ {
			f.next[st][c] = f.next[st][c+'a'-'A']
		}
	}
	return f
}

// litHits says which of a foldScanner's literals occur in a text, and where
// the first occurrence of each ends.
type litHits struct {
	found    uint64
	firstEnd [64]int
	exact    []litHit // every occurrence of an exact rule's literal, in order
}

type litHit struct{ rule, end int }

// from returns where to start looking for a match of a rule whose matches
// contain one of the literals in need: the start of the line where the
// first of them ends. Those rules' matches start on the line of the first
// literal they contain (what comes before it in a match is never a
// newline), so none starts before; and a newline, like the start of the
// text, is a non-word character for \b and ends any UTF-8 sequence, so
// matching s[from:] finds the same matches as matching s.
func (h *litHits) from(s string, need uint64) int {
	first := len(s)
	for bits := need & h.found; bits != 0; bits &= bits - 1 {
		first = min(first, h.firstEnd[mathbits.TrailingZeros64(bits)])
	}
	return strings.LastIndexByte(s[:first], '\n') + 1
}

// scan reports the literals that occur in s folded for the filter: ASCII
// letters lower-cased byte for byte (the literals are ASCII), and the two
// non-ASCII letters that the rules' case-insensitive matching folds onto
// ASCII ones (the Kelvin sign onto k, the long s onto s) read as k and s.
func (f *foldScanner) scan(s string, h *litHits) {
	h.found = 0
	h.exact = h.exact[:0]
	st := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 0xe2 || c == 0xc5 {
			switch {
			case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x84 && s[i+2] == 0xaa: // U+212A
				c, i = 'k', i+2
			case c == 0xc5 && i+1 < len(s) && s[i+1] == 0xbf: // U+017F
				c, i = 's', i+1
			}
		}
		st = int(f.next[st][c])
		if o := f.out[st]; o&(f.exact|^h.found) != 0 {
			for bits := o &^ h.found; bits != 0; bits &= bits - 1 {
				h.firstEnd[mathbits.TrailingZeros64(bits)] = i + 1
			}
			h.found |= o
			// An exact literal's bytes are ASCII, which the folding
			// never consumes as part of a longer sequence, so each of its
			// occurrences is a hit ending here.
			for bits := o & f.exact; bits != 0; bits &= bits - 1 {
				b := mathbits.TrailingZeros64(bits)
				if lit := f.lits[b]; i+1 >= len(lit) && s[i+1-len(lit):i+1] == lit {
					h.exact = append(h.exact, litHit{f.ruleOf[b], i + 1})
				}
			}
		}
	}
}

// lineMatches appends to out the matches of an exact rule in s, running its
// regexp only on the lines that hold one of its literals. Exact rules never
// match across a newline (their character classes exclude it) and their
// matches contain a literal; a newline, like the start and end of the text,
// is a non-word character for \b, and no UTF-8 sequence runs through it, so
// the matches are the same as over the whole of s.
func (ru rule) lineMatches(s string, rule int, hits []litHit, out [][]int) [][]int {
	lineEnd := -1
	for _, h := range hits {
		if h.rule != rule || h.end <= lineEnd {
			continue // another rule's, or on the line just matched
		}
		start := strings.LastIndexByte(s[:h.end], '\n') + 1
		lineEnd = len(s)
		if e := strings.IndexByte(s[h.end:], '\n'); e >= 0 {
			lineEnd = h.end + e
		}
		ms := ru.re.FindAllStringSubmatchIndex(s[start:lineEnd], -1)
		out = append(out, shift(ms, start)...)
	}
	return out
}

// shift moves submatch indexes found in s[by:] onto s.
func shift(ms [][]int, by int) [][]int {
	for _, m := range ms {
		for k := range m {
			if m[k] >= 0 {
				m[k] += by
			}
		}
	}
	return ms
}

var (
	pemBegin = regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----`)
	pemEnd   = regexp.MustCompile(`-----END[A-Z0-9 ]*PRIVATE KEY-----`)
)

// Redactor removes secrets: configured values (the adviser key, gateway
// tokens, values listed in config) and common secret shapes. It is safe for
// concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string // longest first
}

// NewRedactor returns a Redactor that also removes the given values.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		r.AddSecret(s)
	}
	return r
}

// With returns a new Redactor that removes r's secrets and the given values
// too (an execution's credentials); r itself is unchanged.
func (r *Redactor) With(secrets ...string) *Redactor {
	r.mu.RLock()
	n := &Redactor{secrets: append([]string(nil), r.secrets...)}
	r.mu.RUnlock()
	for _, s := range secrets {
		n.AddSecret(s)
	}
	return n
}

// AddSecret adds a value to redact wherever it appears. Values shorter than
// MinSecretLen are ignored.
func (r *Redactor) AddSecret(s string) {
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

type span struct{ start, end int }

// spans returns the sorted, merged byte ranges of s to redact.
func (r *Redactor) spans(s string) []span {
	sp, _ := r.spansGuards(s)
	return sp
}

// spansGuards also returns the whole matches (key and value for key=value
// rules). A stream must not cut through a guard: the key may be what makes
// the value recognisable.
func (r *Redactor) spansGuards(s string) (spans, guards []span) {
	var out []span
	// PEM private key blocks; an unterminated one runs to the end.
	for off := 0; off < len(s) && strings.Contains(s, "-----BEGIN"); {
		loc := pemBegin.FindStringIndex(s[off:])
		if loc == nil {
			break
		}
		start := off + loc[0]
		end := len(s)
		if e := pemEnd.FindStringIndex(s[off+loc[1]:]); e != nil {
			end = off + loc[1] + e[1]
		}
		out = append(out, span{start, end})
		off = end
	}
	var hits litHits
	foldedLits.scan(s, &hits)
	var ms [][]int
	for i, ru := range rules {
		ms = ms[:0]
		switch masks := foldedLits.masks[i]; {
		case ru.exact:
			ms = ru.lineMatches(s, i, hits.exact, ms)
		case masks.mayMatchFolded(hits.found):
			from := hits.from(s, masks.need)
			ms = ru.re.FindAllStringSubmatchIndex(s[from:], -1)
			shift(ms, from)
		}
		for _, m := range ms {
			a, b := m[2*ru.group], m[2*ru.group+1]
			if a >= 0 && b > a {
				out = append(out, span{a, b})
				if ru.group != 0 {
					guards = append(guards, span{m[0], m[1]})
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
			out = append(out, span{off + i, off + i + len(sec)})
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

// apply writes s[:limit] with every span (clipped to limit) replaced.
func apply(b *strings.Builder, s string, spans []span, limit int) {
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

// redactPrefix returns s[:limit] with every span (clipped to limit)
// replaced, without a copy when none starts before limit.
func redactPrefix(s string, spans []span, limit int) string {
	if len(spans) == 0 || spans[0].start >= limit {
		return s[:limit]
	}
	var b strings.Builder
	b.Grow(limit + len(spans)*len(Redacted))
	apply(&b, s, spans, limit)
	return b.String()
}

// Redact returns s with every secret replaced by [REDACTED].
func (r *Redactor) Redact(s string) string {
	sp := r.spans(s)
	if len(sp) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	apply(&b, s, sp, len(s))
	return b.String()
}

// RedactAll redacts every element of ss in place and returns it.
func (r *Redactor) RedactAll(ss []string) []string {
	for i := range ss {
		ss[i] = r.Redact(ss[i])
	}
	return ss
}

// RedactReceipt redacts the free-text fields of a receipt in place: command,
// argv, reasons, cwd, detail, stdout and stderr. Digests are left alone (they
// are keyed and were computed over the full streams).
func (r *Redactor) RedactReceipt(rc *receipt.Receipt) {
	rc.Command = r.Redact(rc.Command)
	rc.Cwd = r.Redact(rc.Cwd)
	rc.Detail = r.Redact(rc.Detail)
	rc.Stdout = r.Redact(rc.Stdout)
	rc.Stderr = r.Redact(rc.Stderr)
	r.RedactAll(rc.Policy.Argv)
	r.RedactAll(rc.Policy.Reasons)
}

// DefaultHold is the tail a StreamRedactor keeps back by default. A secret
// (or secret shape) no longer than this is redacted even when it straddles
// chunk boundaries.
const DefaultHold = 4096

// StreamRedactor redacts a byte stream chunk by chunk for live output. It
// holds back the last Hold bytes (more while a match runs through the tail)
// so a secret split across Write calls is still caught; PEM private key
// blocks of any length are swallowed whole. Call Close to flush the tail.
// Not safe for concurrent use.
type StreamRedactor struct {
	r     *Redactor
	w     io.Writer
	hold  int
	buf   []byte
	inPEM bool
	cont  bool // a forced cut split a secret: drop its continuation
}

// NewStream returns a StreamRedactor writing redacted output to w. hold <= 0
// means DefaultHold.
func (r *Redactor) NewStream(w io.Writer, hold int) *StreamRedactor {
	if hold <= 0 {
		hold = DefaultHold
	}
	return &StreamRedactor{r: r, w: w, hold: hold}
}

// Write buffers p and writes out whatever can no longer be part of a secret.
func (s *StreamRedactor) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	return len(p), s.drain(false)
}

// Close redacts and writes the held tail. It does not close the writer.
func (s *StreamRedactor) Close() error { return s.drain(true) }

// Flush is Close: it writes out the held tail; the stream can go on after.
func (s *StreamRedactor) Flush() error { return s.drain(true) }

// FlushLines writes out the held tail up to its last newline, for output
// that paused: complete lines go out now, while a line still being written
// (which may be the first part of a secret, "password=" …) waits for the
// rest of it.
func (s *StreamRedactor) FlushLines() error {
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

func (s *StreamRedactor) emit(str string) error {
	if str == "" {
		return nil
	}
	_, err := io.WriteString(s.w, str)
	return err
}

func (s *StreamRedactor) keep(from int) {
	s.buf = append(s.buf[:0], s.buf[from:]...)
}

func (s *StreamRedactor) drain(final bool) error {
	for {
		if s.cont {
			i := 0
			for i < len(s.buf) && !isSpace(s.buf[i]) {
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
			if loc := pemEnd.FindIndex(s.buf); loc != nil {
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
			loc = pemBegin.FindStringIndex(str)
		}
		if loc != nil && pemEnd.FindStringIndex(str[loc[1]:]) == nil {
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
		if final {
			s.buf = s.buf[:0]
			return s.emit(redactPrefix(str, spans, len(str)))
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
		s.keep(next)
		return s.emit(redactPrefix(str, spans, cut))
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}
