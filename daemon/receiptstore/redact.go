package receiptstore

import (
	"bytes"
	"io"
	mathbits "math/bits"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unsafe"

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
	// assign: the rule is the key=value one, whose regexp runs only on
	// the window around each of its literals that a match can take
	// (assignWindow), not from the first one to the end of the text.
	assign bool
}

// Common secret shapes. Rules that name a key (KEY=value, "password": "...",
// Authorization:) replace only the credential and keep the name, so the
// output still says what was there.
var rules = []rule{
	{"authorization", regexp.MustCompile(`(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*("[^"\r\n]*"|'[^'\r\n]*'|[^\r\n"']+)`), 1, []string{"authorization"}, "", false, false},
	{"json_secret", regexp.MustCompile(`(?i)"[a-z0-9_.\-]*(?:password|passwd|secret|token|api[_-]?key|apikey|private[_-]?key|access[_-]?key|credentials?)"\s*:\s*"((?:[^"\\]|\\.)*)"`), 1, []string{"passw", "secret", "token", "key", "credential"}, `"`, false, false},
	{"assignment", regexp.MustCompile(`(?i)\b[a-z0-9_.\-]*(?:_key|_token|_secret|_password|_passwd|_pwd|password|passwd|secret|token|apikey)\s*=\s*("[^"]*"|'[^']*'|[^\s"'&;,]+)`), 1, []string{"_key", "token", "secret", "passw", "_pwd", "apikey"}, "=", false, true},
	{"yaml_password", regexp.MustCompile(`(?i)\b(?:password|passwd)\s*:\s*([^\s"',}]+)`), 1, []string{"passw"}, ":", false, false},
	// The password of a URL's userinfo (postgres://user:PASSWORD@host/db), in
	// any scheme; the user name and the host stay.
	{"url_password", regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]*://[^\s/?#@:]*:([^\s/?#@]+)@`), 1, []string{"://"}, "@", false, false},
	{"aws_access_key", regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`), 0, []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"}, "", true, false},
	{"github_token", regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255})\b`), 0, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}, "", true, false},
	{"slack_token", regexp.MustCompile(`\bxox[a-z]-[A-Za-z0-9-]{10,}`), 0, []string{"xox"}, "", true, false},
	{"sk_key", regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}`), 0, []string{"sk-"}, "", true, false},
	{"jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`), 0, []string{"eyJ"}, "", true, false},
}

// foldedLits is one automaton over every literal of the case-insensitive
// rules' filters (need and needAll): a single pass over the text, folding it
// byte by byte as the filter always has, says which of them occur, instead
// of lower-casing a copy of each chunk and searching it once per literal.
var foldedLits = newFoldScanner(rules)

// ruleMasks holds, per rule, the automaton's bits for need and needAll;
// allByte is a one-byte needAll literal (the `=` of key=value), looked for
// with strings.IndexByte instead of in the automaton: it occurs on most
// lines of most output, and each occurrence would be a hit to record.
type ruleMasks struct {
	need, needAll uint64
	allByte       byte
}

// mayMatchFolded is the cheap filter of a case-insensitive rule: false
// means the rule cannot match s, in which only the literals in found (bits
// of foldedLits) occur.
func (m ruleMasks) mayMatchFolded(s string, found uint64) bool {
	if m.needAll != 0 && found&m.needAll == 0 {
		return false
	}
	if m.need != 0 && found&m.need == 0 {
		return false
	}
	// The byte is ASCII punctuation: it has no case and is never part of
	// a folded sequence, so the text holds it exactly when its folded form
	// does.
	return m.allByte == 0 || strings.IndexByte(s, m.allByte) >= 0
}

// foldScanner is an Aho–Corasick automaton over lower-case ASCII literals,
// as a full transition table that also folds ASCII case. States are
// numbered so that every state in which a literal ends, and the marker
// state entered on the first byte of the Kelvin sign or the long s, is at
// least accept: the scan tests one register per byte, and only those
// states take the slow path. Table entries are premultiplied by 256 (the
// next state's row), so a step is one load.
type foldScanner struct {
	tbl    *[1 << 16]uint16
	accept uint
	marker uint     // premultiplied
	out    []uint64 // literals that end in each state (by state number)
	masks  []ruleMasks
	maxLen int // the longest literal, in folded characters
	// exact marks the literals of exact rules, which the scan checks
	// byte for byte at every hit; lits holds them as written and ruleOf
	// their rule.
	exact  uint64
	lits   [64]string
	ruleOf [64]int
}

func newFoldScanner(rs []rule) *foldScanner {
	next, out := make([][256]int, 1), make([]uint64, 1)
	f := &foldScanner{masks: make([]ruleMasks, len(rs))}
	bits := map[string]uint64{}
	add := func(key, lit string) uint64 {
		if b, ok := bits[key]; ok {
			return b
		}
		if len(bits) == 64 {
			panic("receiptstore: too many filter literals")
		}
		f.maxLen = max(f.maxLen, len(lit))
		bit := uint64(1) << len(bits)
		bits[key] = bit
		st := 0
		for i := 0; i < len(lit); i++ {
			c := lit[i]
			if next[st][c] == 0 {
				next = append(next, [256]int{})
				out = append(out, 0)
				next[st][c] = len(next) - 1
			}
			st = next[st][c]
		}
		out[st] |= bit
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
		switch {
		case len(ru.needAll) == 1:
			f.masks[i].allByte = ru.needAll[0]
		case ru.needAll != "":
			f.masks[i].needAll = add(ru.needAll, ru.needAll)
		}
	}
	// Breadth first: fail links, then every missing edge follows the fail
	// link's edge, so the scan is one table lookup per byte.
	fail := make([]int, len(next))
	queue := []int{}
	for c := 0; c < 256; c++ {
		if t := next[0][c]; t != 0 {
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		out[st] |= out[fail[st]]
		for c := 0; c < 256; c++ {
			t := next[st][c]
			if t == 0 {
				next[st][c] = next[fail[st]][c]
				continue
			}
			fail[t] = next[fail[st]][c]
			queue = append(queue, t)
		}
	}
	// Number the states: the root first, then those without output, then
	// those with output, then the marker.
	n := len(next)
	if n+1 > 256 {
		panic("receiptstore: filter literals too long")
	}
	num := make([]int, n)
	k := 0
	for pass := range 2 {
		for st := range n {
			if (out[st] != 0) == (pass == 1) {
				num[st] = k
				k++
			}
		}
		if pass == 0 {
			f.accept = uint(k) << 8
		}
	}
	f.marker = uint(n) << 8
	f.tbl = new([1 << 16]uint16)
	f.out = make([]uint64, n+1)
	for st := range n {
		f.out[num[st]] = out[st]
		row := f.tbl[num[st]<<8 : num[st]<<8+256]
		for c := range 256 {
			// The literals are lower case: an upper-case letter moves as
			// its lower-case one.
			lc := c
			if 'A' <= c && c <= 'Z' {
				lc = c + 'a' - 'A'
			}
			row[c] = uint16(num[next[st][lc]] << 8)
		}
		row[0xe2], row[0xc5] = uint16(f.marker), uint16(f.marker)
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

// firstEndOf is where the first of the literals in need that occur ends.
func (h *litHits) firstEndOf(need uint64) int {
	first := -1
	for bits := need & h.found; bits != 0; bits &= bits - 1 {
		if e := h.firstEnd[mathbits.TrailingZeros64(bits)]; first < 0 || e < first {
			first = e
		}
	}
	return first
}

// isKeyByte reports whether c is an ASCII byte of the assignment rule's
// key class, [a-z0-9_.\-] under (?i).
func isKeyByte(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-'
}

// keyRune returns the length of the key-class character at s[i:] (the
// Kelvin sign and the long s are in the class under (?i): they fold onto k
// and s), or 0.
func keyRune(s string, i int) int {
	switch {
	case i >= len(s):
		return 0
	case isKeyByte(s[i]):
		return 1
	case strings.HasPrefix(s[i:], "\u212a"):
		return 3
	case strings.HasPrefix(s[i:], "\u017f"):
		return 2
	}
	return 0
}

// keyRunStart returns where the run of key-class characters that ends at
// i begins.
func keyRunStart(s string, i int) int {
	for i > 0 {
		switch {
		case isKeyByte(s[i-1]):
			i--
		case i >= 3 && s[i-3:i] == "\u212a":
			i -= 3
		case i >= 2 && s[i-2:i] == "\u017f":
			i -= 2
		default:
			return i
		}
	}
	return 0
}

// assignWindow returns the end of the only match the assignment rule can
// have whose key ends at runEnd, the end of a run of key-class characters,
// or runEnd when there is none. The rule is
// \b[key class]*KEYWORD\s*=\s*("[^"]*"|'[^']*'|[^\s"'&;,]+): its
// keyword is made of key-class characters and is followed by a byte that
// is not one, so it ends where the run ends; the rest is fixed from there
// (greedy spaces, "=", greedy spaces, a quoted value up to its closing
// quote or an unquoted one up to the next space, quote, &, ; or comma).
func assignWindow(s string, runEnd int) int {
	const space = " \t\n\f\r" // \s in Go's regexp
	j := runEnd
	for j < len(s) && strings.IndexByte(space, s[j]) >= 0 {
		j++
	}
	if j >= len(s) || s[j] != '=' {
		return runEnd
	}
	j++
	for j < len(s) && strings.IndexByte(space, s[j]) >= 0 {
		j++
	}
	if j >= len(s) {
		return runEnd
	}
	switch q := s[j]; q {
	case '"', '\'':
		k := strings.IndexByte(s[j+1:], q)
		if k < 0 {
			return runEnd // no closing quote, and no unquoted value starts with one
		}
		return j + 1 + k + 1
	case '&', ';', ',':
		return runEnd
	}
	if k := strings.IndexAny(s[j:], space+"\"'&;,"); k >= 0 {
		return j + k
	}
	return len(s)
}

// assignMatches appends the assignment rule's matches in s, given where
// the first of its literals ends (first). A match starts in the run of
// key-class characters that holds its keyword, and so one of the rule's
// literals (each is key-class characters and part of a keyword), and ends
// at assignWindow of that run; the byte before the run is not a word
// character and ends any UTF-8 sequence, like the start of a text, so the
// regexp on [run start, window end) finds there what it finds in s. Runs
// are visited in order, each from the next literal after the last match
// (or after the last run, when it had none), found with the filter
// automaton from that point; FindAll on s resumes at a match's end too.
func (ru rule) assignMatches(s string, first int, need uint64, out [][]int) [][]int {
	for end := first; end >= 0; {
		// The literal ends at end and lies in a run: find its bounds.
		start := keyRunStart(s, end)
		runEnd := end
		for n := keyRune(s, runEnd); n > 0; n = keyRune(s, runEnd) {
			runEnd += n
		}
		next := runEnd
		if w := assignWindow(s, runEnd); w > runEnd {
			// The leftmost match in the window, if it starts in the run,
			// is the run's match (ending at w); one starting after the
			// run lies in the value and may reach past w, so it is left to
			// its own run.
			if m := ru.re.FindStringSubmatchIndex(s[start:w]); m != nil && start+m[0] < runEnd {
				out = append(out, shift([][]int{m}, start)...)
				next = w
			}
		}
		end = foldedLits.nextEnd(s, next, need)
	}
	return out
}

// nextEnd returns where the first occurrence of a literal in mask that
// lies in s[from:] ends, or -1.
func (f *foldScanner) nextEnd(s string, from int, mask uint64) int {
	var st uint
	for i := uint(from); int(i) < len(s); i++ {
		prev := st
		st = uint(f.tbl[uint16(st+uint(s[i]))])
		if st >= f.accept {
			if i, st = f.slow(s, i, st, prev, nil); st >= f.accept && f.out[st>>8]&mask != 0 {
				return int(i) + 1
			}
		}
	}
	return -1
}

// scanChains is how many pieces of a long text the scan walks at once:
// each step of the automaton waits for the load of the one before, so
// independent walks through different pieces fill the time between.
const scanChains = 4

// scanSplitMin is the shortest text the scan splits into pieces.
const scanSplitMin = 4 << 10

// scan reports the literals that occur in s folded for the filter: ASCII
// letters lower-cased byte for byte (the literals are ASCII), and the two
// non-ASCII letters that the rules' case-insensitive matching folds onto
// ASCII ones (the Kelvin sign onto k, the long s onto s) read as k and s.
//
// A long text is cut into scanChains pieces walked side by side, each
// recording the literals that end in its own piece; a piece's walk starts
// 4×maxLen bytes early so that its state is the sequential walk's when its
// piece begins (the state depends only on the last maxLen-1 folded
// characters, at most 3 bytes each, and a folded sequence is recognised
// from its first byte whatever precedes it). The pieces' findings are
// merged in order, so the result is the sequential walk's.
func (f *foldScanner) scan(s string, h *litHits) { f.scanSplit(s, h, scanSplitMin) }

// scanSplit is scan splitting texts of at least splitMin bytes (tests
// split short ones).
func (f *foldScanner) scanSplit(s string, h *litHits, splitMin int) {
	h.found = 0
	h.exact = h.exact[:0]
	if len(s) < splitMin {
		f.walk(s, 0, 0, len(s), h)
		return
	}
	var cut [scanChains + 1]int
	for j := range scanChains {
		cut[j] = len(s) / scanChains * j
	}
	cut[scanChains] = len(s)
	var part [scanChains]litHits
	var st, i [scanChains]uint
	for j := range scanChains {
		part[j].exact = nil
		i[j], st[j] = uint(cut[j]), 0
		if j > 0 {
			i[j], st[j] = f.warm(s, max(0, cut[j]-4*f.maxLen), cut[j])
		}
	}
	part[0].exact = h.exact
	f.walk4(s, &i, &st, &cut, &part)
	for j := range scanChains {
		f.walkFrom(s, i[j], st[j], cut[j+1], &part[j])
	}
	for j := range scanChains {
		p := &part[j]
		for bits := p.found &^ h.found; bits != 0; bits &= bits - 1 {
			b := mathbits.TrailingZeros64(bits)
			h.firstEnd[b] = p.firstEnd[b]
		}
		h.found |= p.found
		if j == 0 {
			h.exact = p.exact
		} else {
			h.exact = append(h.exact, p.exact...)
		}
	}
}

// walk scans s[from:to] from the root state after a warm-up from warmFrom
// that records nothing.
func (f *foldScanner) walk(s string, warmFrom, from, to int, h *litHits) {
	i, st := f.warm(s, warmFrom, from)
	f.walkFrom(s, i, st, to, h)
}

// warm walks s from i up to (at least) to without recording, and returns
// where it stopped and its state.
func (f *foldScanner) warm(s string, i, to int) (uint, uint) {
	var st uint
	for i < to {
		prev := st
		st = uint(f.tbl[uint16(st+uint(s[i]))])
		if st >= f.accept {
			var ii uint
			ii, st = f.slow(s, uint(i), st, prev, nil)
			i = int(ii)
		}
		i++
	}
	return uint(i), st
}

// walkFrom continues a walk at byte i in state st until byte to, recording
// into h.
func (f *foldScanner) walkFrom(s string, i, st uint, to int, h *litHits) {
	for int(i) < to {
		prev := st
		st = uint(f.tbl[uint16(st+uint(s[i]))])
		if st >= f.accept {
			i, st = f.slow(s, i, st, prev, h)
		}
		i++
	}
}

// walk4 walks the scanChains pieces side by side until one of them reaches
// its end; the caller finishes each.
func (f *foldScanner) walk4(s string, i, st *[scanChains]uint, cut *[scanChains + 1]int, part *[scanChains]litHits) {
	t, acc := f.tbl, f.accept
	i0, i1, i2, i3 := i[0], i[1], i[2], i[3]
	s0, s1, s2, s3 := st[0], st[1], st[2], st[3]
	e0, e1, e2, e3 := uint(cut[1]), uint(cut[2]), uint(cut[3]), uint(cut[4])
	for i0 < e0 && i1 < e1 && i2 < e2 && i3 < e3 {
		p0, p1, p2, p3 := s0, s1, s2, s3
		s0 = uint(t[uint16(s0+uint(s[i0]))])
		s1 = uint(t[uint16(s1+uint(s[i1]))])
		s2 = uint(t[uint16(s2+uint(s[i2]))])
		s3 = uint(t[uint16(s3+uint(s[i3]))])
		if s0 >= acc {
			i0, s0 = f.slow(s, i0, s0, p0, &part[0])
		}
		if s1 >= acc {
			i1, s1 = f.slow(s, i1, s1, p1, &part[1])
		}
		if s2 >= acc {
			i2, s2 = f.slow(s, i2, s2, p2, &part[2])
		}
		if s3 >= acc {
			i3, s3 = f.slow(s, i3, s3, p3, &part[3])
		}
		i0, i1, i2, i3 = i0+1, i1+1, i2+1, i3+1
	}
	i[0], i[1], i[2], i[3] = i0, i1, i2, i3
	st[0], st[1], st[2], st[3] = s0, s1, s2, s3
}

// slow handles a step that entered a state of at least accept: the marker
// (byte i begins the Kelvin sign or the long s, read as k or s; any other
// sequence moves to the root, as no literal holds a non-ASCII byte), and a
// state in which literals end, recorded into h (nil: recording nothing).
// It returns the index of the step's last byte and the state after it.
func (f *foldScanner) slow(s string, i, st, prev uint, h *litHits) (uint, uint) {
	if st == f.marker {
		n := uint(len(s))
		switch {
		case s[i] == 0xe2 && i+2 < n && s[i+1] == 0x84 && s[i+2] == 0xaa: // U+212A
			st, i = uint(f.tbl[uint16(prev+'k')]), i+2
		case s[i] == 0xc5 && i+1 < n && s[i+1] == 0xbf: // U+017F
			st, i = uint(f.tbl[uint16(prev+'s')]), i+1
		default:
			st = 0
		}
		if st < f.accept || h == nil {
			return i, st
		}
	}
	if h == nil {
		return i, st
	}
	o := f.out[st>>8]
	if o&(f.exact|^h.found) == 0 {
		return i, st
	}
	for bits := o &^ h.found; bits != 0; bits &= bits - 1 {
		h.firstEnd[mathbits.TrailingZeros64(bits)] = int(i) + 1
	}
	h.found |= o
	// An exact literal's bytes are ASCII, which the folding never
	// consumes as part of a longer sequence, so each of its occurrences
	// is a hit ending here.
	for bits := o & f.exact; bits != 0; bits &= bits - 1 {
		b := mathbits.TrailingZeros64(bits)
		if lit := f.lits[b]; int(i)+1 >= len(lit) && s[int(i)+1-len(lit):i+1] == lit {
			h.exact = append(h.exact, litHit{f.ruleOf[b], int(i) + 1})
		}
	}
	return i, st
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
	return r.spansGuardsPEM(s, hasPEMBegin(s))
}

// hasPEMBegin is the cheap test before the PEM block scan.
func hasPEMBegin(s string) bool { return strings.Contains(s, "-----BEGIN") }

// spansGuardsPEM is spansGuards for a caller that has already looked for
// the start of a PEM block (pem: hasPEMBegin(s)).
func (r *Redactor) spansGuardsPEM(s string, pem bool) (spans, guards []span) {
	var out []span
	// PEM private key blocks; an unterminated one runs to the end.
	for off := 0; off < len(s) && pem; {
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
		case ru.assign && masks.mayMatchFolded(s, hits.found):
			ms = ru.assignMatches(s, hits.firstEndOf(masks.need), masks.need, ms)
		case masks.mayMatchFolded(s, hits.found):
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

// RedactAll returns ss with every element redacted, as a new slice: ss is
// often shared with what runs (a decision's argv is its request's), and
// redacting it in place would change the command.
func (r *Redactor) RedactAll(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = r.Redact(s)
	}
	return out
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
	rc.Policy.Argv = r.RedactAll(rc.Policy.Argv)
	rc.Policy.Reasons = r.RedactAll(rc.Policy.Reasons)
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
// means DefaultHold. w must not keep the bytes or string it is given past
// the call (they may be the redactor's own buffer).
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
		// The held bytes are read in place: str is used only until the
		// next change to s.buf (every emit comes before the keep after it)
		// and the writer copies what it is given.
		str := unsafe.String(unsafe.SliceData(s.buf), len(s.buf))
		var loc []int
		pem := hasPEMBegin(str)
		if pem {
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
		spans, guards := s.r.spansGuardsPEM(str, pem)
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
		err := s.emit(redactPrefix(str, spans, cut))
		s.keep(next)
		return err
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}
