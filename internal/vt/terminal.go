// Package vt is a terminal emulator that turns what a program writes to a
// pseudo-terminal into a screen of plain text: the lines a person would see,
// where the cursor is, whether the alternate screen (less, vim, top) is up,
// and the lines that scrolled off the top. Colours and other attributes are
// read and dropped; what is kept is text, because the screen is read by
// agents and language models, which cannot follow cursor-movement codes.
//
// It understands UTF-8 (wide characters take two cells), the C0 controls,
// cursor movement, erasing, insert/delete, scroll regions, autowrap with the
// pending-wrap rule, the alternate screen, window titles (OSC 0 and 2) and the
// DEC special graphics character set; control strings (DCS, APC, PM, SOS)
// are swallowed. Sanitize turns raw output into plain text without a screen.
package vt

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Limits on the screen size: larger requests are reduced to these. A cell
// takes 16 bytes and a terminal keeps two screens, so the largest terminal
// holds 8 MB.
const (
	MaxRows = 500
	MaxCols = 500
)

// Scrollback defaults, used when Options leaves them 0.
const (
	DefaultScrollbackLines = 2000
	DefaultScrollbackBytes = 1 << 20
)

// Options tune a Terminal. The zero value gives the defaults.
type Options struct {
	// ScrollbackLines and ScrollbackBytes bound the lines kept after they
	// scroll off the top of the main screen; the oldest go first. 0 means
	// the default (2000 lines, 1 MiB), a negative value keeps none.
	ScrollbackLines int
	ScrollbackBytes int
	// Reply, when set, receives the terminal's answers to the queries a
	// program may send (cursor position report CSI 6n, status CSI 5n, device
	// attributes CSI c); a program that waits for the answer hangs without
	// it. It is called from Write, after the terminal's lock is released,
	// typically to write the answer to the pty master.
	Reply func(p []byte)
}

// Snapshot is the screen at one moment.
type Snapshot struct {
	Rows, Cols int
	// Lines has exactly Rows entries, each without trailing spaces.
	Lines []string
	// CursorRow and CursorCol are 0-based and always on the screen.
	CursorRow, CursorCol int
	CursorVisible        bool
	AltScreen            bool
	Title                string
	// AppCursorKeys is DECCKM: the program asked for arrow keys as ESC O A
	// (not ESC [ A), as readline, less and vim do.
	AppCursorKeys bool
	// BracketedPaste: the program wants pasted text between ESC [200~ and
	// ESC [201~ so it does not run it line by line.
	BracketedPaste bool
}

// Text is the screen as one string: the lines joined by "\n", without the
// empty lines at the bottom.
func (s Snapshot) Text() string {
	n := len(s.Lines)
	for n > 0 && s.Lines[n-1] == "" {
		n--
	}
	return strings.Join(s.Lines[:n], "\n")
}

// cell is one character cell. A wide character takes its cell (wide set)
// and the next one, which holds wideTail.
// cells hold no pointers, so a screen costs the garbage collector nothing.
type cell struct {
	r    rune // 0: blank
	comb [maxComb]rune
	wide bool
}

const wideTail rune = -1

const maxComb = 2 // combining marks kept per cell; more are dropped

type cursor struct {
	row, col    int
	pendingWrap bool // the last column was written; the next character wraps first
}

type savedCursor struct {
	cursor
	origin   bool
	autowrap bool
	charsets [2]bool
	gl       int
	set      bool
}

// Terminal is a screen fed by Write. It is safe for concurrent use.
type Terminal struct {
	mu    sync.Mutex
	p     parser
	reply func([]byte)
	out   []byte // answers collected during one Write

	rows, cols int
	main, alt  [][]cell
	altActive  bool
	cur        cursor
	savedMain  savedCursor
	savedAlt   savedCursor
	top, bot   int // scroll region, inclusive rows
	tabs       []bool
	visible    bool
	autowrap   bool
	origin     bool
	insert     bool
	newline    bool    // LNM: LF also returns the carriage
	appCursor  bool    // DECCKM
	paste      bool    // bracketed paste (?2004)
	charsets   [2]bool // G0, G1: true when DEC special graphics
	gl         int     // which of G0/G1 is in use (SI/SO)
	last       rune    // last character printed, for REP
	title      string
	sb         scrollback
}

// New returns a blank terminal of rows×cols cells (at least 1×1, at most
// MaxRows×MaxCols).
func New(rows, cols int, o Options) *Terminal {
	rows, cols = clampSize(rows, cols)
	t := &Terminal{reply: o.Reply}
	t.sb.init(o.ScrollbackLines, o.ScrollbackBytes)
	t.rows, t.cols = rows, cols
	t.reset()
	return t
}

func clampSize(rows, cols int) (int, int) {
	return min(max(rows, 1), MaxRows), min(max(cols, 1), MaxCols)
}

// reset is RIS: both screens blank, modes and cursor to their defaults. The
// scrollback and the title stay.
func (t *Terminal) reset() {
	t.main = newScreen(t.rows, t.cols)
	t.alt = newScreen(t.rows, t.cols)
	t.altActive = false
	t.cur = cursor{}
	t.savedMain = savedCursor{autowrap: true}
	t.savedAlt = savedCursor{autowrap: true}
	t.top, t.bot = 0, t.rows-1
	t.tabs = defaultTabs(t.cols, nil)
	t.visible = true
	t.autowrap = true
	t.origin = false
	t.insert = false
	t.newline = false
	t.appCursor = false
	t.paste = false
	t.charsets = [2]bool{}
	t.gl = 0
	t.last = 0
}

func newScreen(rows, cols int) [][]cell {
	s := make([][]cell, rows)
	for i := range s {
		s[i] = make([]cell, cols)
	}
	return s
}

// defaultTabs keeps the stops of old that still fit and sets one every 8
// columns beyond.
func defaultTabs(cols int, old []bool) []bool {
	tabs := make([]bool, cols)
	for i := range tabs {
		if i < len(old) {
			tabs[i] = old[i]
		} else {
			tabs[i] = i%8 == 0 && i > 0
		}
	}
	return tabs
}

// Write feeds program output to the terminal. It never fails.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.p.feed(t, p)
	out := t.out
	t.out = nil
	t.mu.Unlock()
	if len(out) > 0 && t.reply != nil {
		t.reply(out)
	}
	return len(p), nil
}

// Resize changes the screen size. Lines are not reflowed: a narrower screen
// cuts them, a shorter one moves the top lines of the main screen into the
// scrollback when the cursor would fall off the bottom, else drops the
// bottom lines.
func (t *Terminal) Resize(rows, cols int) {
	rows, cols = clampSize(rows, cols)
	t.mu.Lock()
	defer t.mu.Unlock()
	if rows == t.rows && cols == t.cols {
		return
	}
	// Rows: on the screen in use keep the cursor's line on the screen.
	shift := 0
	if rows < t.rows && t.cur.row >= rows {
		shift = t.cur.row - rows + 1
	}
	if !t.altActive {
		for i := 0; i < shift; i++ {
			t.sb.push(lineText(t.main[i]))
		}
	}
	t.main = resizeScreen(t.main, rows, cols, shift, !t.altActive)
	t.alt = resizeScreen(t.alt, rows, cols, shift, t.altActive)
	t.cur.row -= shift
	t.rows, t.cols = rows, cols
	t.top, t.bot = 0, rows-1
	t.tabs = defaultTabs(cols, t.tabs)
	t.clampCursor()
	t.cur.pendingWrap = false
	t.savedMain.clamp(rows, cols)
	t.savedAlt.clamp(rows, cols)
}

// resizeScreen returns s as rows×cols; when active it drops the first shift
// lines (they went to the scrollback or off the alternate screen).
func resizeScreen(s [][]cell, rows, cols, shift int, active bool) [][]cell {
	if !active {
		shift = 0
	}
	s = s[shift:]
	out := make([][]cell, rows)
	for i := range out {
		line := make([]cell, cols)
		if i < len(s) {
			copy(line, s[i])
			repairWide(line)
		}
		out[i] = line
	}
	return out
}

func (c *savedCursor) clamp(rows, cols int) {
	c.row = min(c.row, rows-1)
	c.col = min(c.col, cols-1)
	c.pendingWrap = false
}

// Snapshot returns the screen in use as text.
func (t *Terminal) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Snapshot{
		Rows:           t.rows,
		Cols:           t.cols,
		Lines:          make([]string, t.rows),
		CursorRow:      t.cur.row,
		CursorCol:      t.cur.col,
		CursorVisible:  t.visible,
		AltScreen:      t.altActive,
		Title:          t.title,
		AppCursorKeys:  t.appCursor,
		BracketedPaste: t.paste,
	}
	for i, line := range t.screen() {
		s.Lines[i] = lineText(line)
	}
	return s
}

// Scrollback returns up to limit lines (all when limit <= 0) of the lines
// that scrolled off the top of the main screen, oldest first, starting at
// offset, and how many lines it holds in all.
func (t *Terminal) Scrollback(offset, limit int) (lines []string, total int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sb.read(offset, limit)
}

// ScrollbackDropped is how many lines the scrollback has dropped for its
// bounds since the terminal started (or its scrollback was cleared), so a
// reader paging by offset can tell that lines it has not read are gone.
func (t *Terminal) ScrollbackDropped() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sb.dropped
}

// lineText is a line as a string without trailing spaces.
func lineText(line []cell) string {
	end := len(line)
	for end > 0 && (line[end-1].r == 0 || line[end-1].r == ' ' && line[end-1].comb[0] == 0) {
		end--
	}
	b := make([]byte, 0, end)
	for _, c := range line[:end] {
		switch {
		case c.r == wideTail:
		case c.r == 0:
			b = append(b, ' ')
		case c.r < utf8.RuneSelf && c.comb[0] == 0:
			b = append(b, byte(c.r))
		default:
			b = utf8.AppendRune(b, c.r)
			for _, m := range c.comb {
				if m != 0 {
					b = utf8.AppendRune(b, m)
				}
			}
		}
	}
	return string(b)
}

func (t *Terminal) screen() [][]cell {
	if t.altActive {
		return t.alt
	}
	return t.main
}
