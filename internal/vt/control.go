package vt

import (
	"strconv"
	"strings"
	"unicode"
)

// This file holds what each control function does to the screen. Names
// follow the ECMA-48 / DEC mnemonics (CUP, ED, DECSTBM, ...).

// print puts r at the cursor and advances it (the handler's print).
func (t *Terminal) print(r rune) {
	if r >= 0x80 && r < 0xA0 {
		return // C1 controls sent as UTF-8 draw nothing
	}
	if t.charsets[t.gl] && r >= 0x5F && r <= 0x7E {
		r = decSpecial[r-0x5F]
	}
	w := runeWidth(r)
	if w == 0 {
		t.combine(r)
		return
	}
	if w == 2 && t.cols < 2 {
		r, w = ' ', 1 // a wide character cannot fit at all
	}
	if t.cur.pendingWrap && t.autowrap {
		t.cur.col = 0
		t.index()
	}
	t.cur.pendingWrap = false
	line := t.screen()[t.cur.row]
	if w == 2 && t.cur.col == t.cols-1 {
		if !t.autowrap {
			r, w = ' ', 1
		} else {
			t.clearCell(line, t.cur.col)
			t.cur.col = 0
			t.index()
			line = t.screen()[t.cur.row]
		}
	}
	if t.insert {
		t.insertBlanks(line, t.cur.col, w)
	}
	t.clearCell(line, t.cur.col)
	if w == 2 {
		t.clearCell(line, t.cur.col+1)
		line[t.cur.col] = cell{r: r, wide: true}
		line[t.cur.col+1] = cell{r: wideTail}
	} else {
		line[t.cur.col] = cell{r: r}
	}
	t.last = r
	t.cur.col += w
	if t.cur.col >= t.cols {
		t.cur.col = t.cols - 1
		t.cur.pendingWrap = t.autowrap
	}
}

// combine adds a zero-width character to the cell last written.
func (t *Terminal) combine(r rune) {
	row, col := t.cur.row, t.cur.col
	if !t.cur.pendingWrap {
		col--
	}
	if col < 0 {
		return
	}
	line := t.screen()[row]
	if line[col].r == wideTail && col > 0 {
		col--
	}
	c := &line[col]
	if c.r == 0 {
		return
	}
	for i := range c.comb {
		if c.comb[i] == 0 {
			c.comb[i] = r
			return
		}
	}
}

// clearCell blanks the cell at col, and the other half of a wide character
// it belongs to.
func (t *Terminal) clearCell(line []cell, col int) {
	if col < 0 || col >= len(line) {
		return
	}
	if line[col].r == wideTail && col > 0 {
		line[col-1] = cell{}
	}
	if line[col].wide && col+1 < len(line) {
		line[col+1] = cell{}
	}
	line[col] = cell{}
}

// repairWide blanks halves of wide characters left alone by a shift or cut.
func repairWide(line []cell) {
	for i := range line {
		switch {
		case line[i].wide && (i+1 >= len(line) || line[i+1].r != wideTail):
			line[i] = cell{}
		case line[i].r == wideTail && (i == 0 || !line[i-1].wide):
			line[i] = cell{}
		}
	}
}

func (t *Terminal) execute(b byte) {
	switch b {
	case '\b':
		t.cur.pendingWrap = false
		if t.cur.col > 0 {
			t.cur.col--
		}
	case '\t':
		t.tab(1)
	case '\n', '\v', '\f':
		t.index()
		if t.newline {
			t.cur.col = 0
		}
	case '\r':
		t.cur.col = 0
		t.cur.pendingWrap = false
	case 0x0E: // SO
		t.gl = 1
	case 0x0F: // SI
		t.gl = 0
	}
	// BEL and the other C0 controls change nothing on the screen.
}

// index moves the cursor down one line, scrolling the region at its bottom
// (IND, and LF).
func (t *Terminal) index() {
	t.cur.pendingWrap = false
	switch {
	case t.cur.row == t.bot:
		t.scrollUp(t.top, t.bot, 1, true)
	case t.cur.row < t.rows-1:
		t.cur.row++
	}
}

// reverseIndex moves the cursor up one line, scrolling the region down at
// its top (RI).
func (t *Terminal) reverseIndex() {
	t.cur.pendingWrap = false
	switch {
	case t.cur.row == t.top:
		t.scrollDown(t.top, t.bot, 1)
	case t.cur.row > 0:
		t.cur.row--
	}
}

// scrollUp moves rows top..bot up by n, blank lines entering at bot. Lines
// leaving the top of the main screen go to the scrollback when save is set.
func (t *Terminal) scrollUp(top, bot, n int, save bool) {
	s := t.screen()
	n = min(n, bot-top+1)
	if n <= 0 {
		return
	}
	if save && !t.altActive && top == 0 {
		for i := 0; i < n; i++ {
			t.sb.push(lineText(s[i]))
		}
	}
	gone := make([][]cell, n)
	copy(gone, s[top:top+n])
	copy(s[top:], s[top+n:bot+1])
	for i, line := range gone {
		clear(line)
		s[bot-n+1+i] = line
	}
}

// scrollDown moves rows top..bot down by n, blank lines entering at top.
func (t *Terminal) scrollDown(top, bot, n int) {
	s := t.screen()
	n = min(n, bot-top+1)
	if n <= 0 {
		return
	}
	gone := make([][]cell, n)
	copy(gone, s[bot-n+1:bot+1])
	copy(s[top+n:bot+1], s[top:bot-n+1])
	for i, line := range gone {
		clear(line)
		s[top+i] = line
	}
}

func (t *Terminal) tab(n int) {
	t.cur.pendingWrap = false
	for ; n > 0 && t.cur.col < t.cols-1; n-- {
		t.cur.col++
		for t.cur.col < t.cols-1 && !t.tabs[t.cur.col] {
			t.cur.col++
		}
	}
}

func (t *Terminal) backTab(n int) {
	t.cur.pendingWrap = false
	for ; n > 0 && t.cur.col > 0; n-- {
		t.cur.col--
		for t.cur.col > 0 && !t.tabs[t.cur.col] {
			t.cur.col--
		}
	}
}

func (t *Terminal) clampCursor() {
	t.cur.row = min(max(t.cur.row, 0), t.rows-1)
	t.cur.col = min(max(t.cur.col, 0), t.cols-1)
}

// moveTo places the cursor at row, col (0-based, relative to the scroll
// region in origin mode).
func (t *Terminal) moveTo(row, col int) {
	t.cur.pendingWrap = false
	if t.origin {
		row = min(max(row+t.top, t.top), t.bot)
	}
	t.cur.row, t.cur.col = row, col
	t.clampCursor()
}

// moveRow moves the cursor n rows down (up when negative), stopping at the
// scroll region's margin when it starts inside the region.
func (t *Terminal) moveRow(n int) {
	t.cur.pendingWrap = false
	lo, hi := 0, t.rows-1
	if t.cur.row >= t.top && t.cur.row <= t.bot {
		lo, hi = t.top, t.bot
	}
	t.cur.row = min(max(t.cur.row+n, lo), hi)
}

func (t *Terminal) moveCol(n int) {
	t.cur.pendingWrap = false
	t.cur.col = min(max(t.cur.col+n, 0), t.cols-1)
}

// eraseRange blanks cells [from, to) of a line.
func (t *Terminal) eraseRange(line []cell, from, to int) {
	from, to = max(from, 0), min(to, len(line))
	if from >= to {
		return
	}
	t.clearCell(line, from)
	t.clearCell(line, to-1)
	clear(line[from:to])
}

func (t *Terminal) insertBlanks(line []cell, col, n int) {
	n = min(n, t.cols-col)
	copy(line[col+n:], line[col:])
	clear(line[col : col+n])
	repairWide(line)
}

func (t *Terminal) deleteChars(line []cell, col, n int) {
	n = min(n, t.cols-col)
	copy(line[col:], line[col+n:])
	clear(line[t.cols-n:])
	repairWide(line)
}

func (t *Terminal) eraseDisplay(mode int) {
	s := t.screen()
	row, col := t.cur.row, t.cur.col
	switch mode {
	case 0:
		t.eraseRange(s[row], col, t.cols)
		for _, line := range s[row+1:] {
			clear(line)
		}
	case 1:
		t.eraseRange(s[row], 0, col+1)
		for _, line := range s[:row] {
			clear(line)
		}
	case 2:
		for _, line := range s {
			clear(line)
		}
	case 3: // xterm: erase the saved lines
		t.sb.clear()
	}
}

func (t *Terminal) eraseLine(mode int) {
	line := t.screen()[t.cur.row]
	switch mode {
	case 0:
		t.eraseRange(line, t.cur.col, t.cols)
	case 1:
		t.eraseRange(line, 0, t.cur.col+1)
	case 2:
		clear(line)
	}
}

func (t *Terminal) saveCursor() {
	c := savedCursor{cursor: t.cur, origin: t.origin, autowrap: t.autowrap, charsets: t.charsets, gl: t.gl, set: true}
	if t.altActive {
		t.savedAlt = c
	} else {
		t.savedMain = c
	}
}

func (t *Terminal) restoreCursor() {
	c := t.savedMain
	if t.altActive {
		c = t.savedAlt
	}
	if !c.set {
		t.origin = false
		t.moveTo(0, 0)
		return
	}
	t.cur = c.cursor
	t.origin, t.autowrap, t.charsets, t.gl = c.origin, c.autowrap, c.charsets, c.gl
	t.clampCursor()
}

// setAlt switches between the main and the alternate screen.
func (t *Terminal) setAlt(on, clearAlt bool) {
	if on == t.altActive {
		if on && clearAlt {
			for _, line := range t.alt {
				clear(line)
			}
		}
		return
	}
	if on && clearAlt {
		for _, line := range t.alt {
			clear(line)
		}
	}
	t.altActive = on
	t.cur.pendingWrap = false
}

func (t *Terminal) escDispatch(inter []byte, final byte) {
	if len(inter) == 0 {
		switch final {
		case '7':
			t.saveCursor()
		case '8':
			t.restoreCursor()
		case 'D':
			t.index()
		case 'E':
			t.index()
			t.cur.col = 0
		case 'M':
			t.reverseIndex()
		case 'H':
			t.tabs[t.cur.col] = true
		case 'c':
			t.reset()
		}
		return
	}
	switch inter[0] {
	case '(', ')': // designate G0 / G1
		g := 0
		if inter[0] == ')' {
			g = 1
		}
		t.charsets[g] = final == '0'
	case '#':
		if final == '8' { // DECALN: fill the screen with E
			for _, line := range t.screen() {
				for i := range line {
					line[i] = cell{r: 'E'}
				}
			}
			t.top, t.bot = 0, t.rows-1
			t.origin = false
			t.moveTo(0, 0)
		}
	}
}

// param is the i-th parameter, or def when it is missing or 0.
func param(params []int, i, def int) int {
	if i < len(params) && params[i] != 0 {
		return params[i]
	}
	return def
}

func (t *Terminal) csiDispatch(private byte, params []int, inter []byte, final byte) {
	if len(inter) > 0 {
		if inter[0] == '!' && final == 'p' && private == 0 { // DECSTR
			t.softReset()
		}
		return // DECSCUSR and the like: nothing on the screen
	}
	if private == '?' {
		switch final {
		case 'h':
			t.decModes(params, true)
		case 'l':
			t.decModes(params, false)
		}
		return
	}
	if private != 0 {
		if private == '>' && final == 'c' {
			t.answer("\x1b[>0;10;1c") // DA2: a VT100-class terminal
		}
		return
	}
	n := param(params, 0, 1)
	if !t.csiCursor(final, params, n) && !t.csiEdit(final, params, n) {
		t.csiReport(final, params)
	}
	// SGR (m) and the rest are read and ignored.
}

// csiCursor runs the CSI sequences that move the cursor or set its bounds
// (n is the first parameter, 1 when missing); it reports whether final was
// one of them.
func (t *Terminal) csiCursor(final byte, params []int, n int) bool {
	switch final {
	case 'A': // CUU
		t.moveRow(-n)
	case 'B', 'e': // CUD, VPR
		t.moveRow(n)
	case 'C', 'a': // CUF, HPR
		t.moveCol(n)
	case 'D': // CUB
		t.moveCol(-n)
	case 'E': // CNL
		t.moveRow(n)
		t.cur.col = 0
	case 'F': // CPL
		t.moveRow(-n)
		t.cur.col = 0
	case 'G', '`': // CHA, HPA
		t.cur.pendingWrap = false
		t.cur.col = min(n-1, t.cols-1)
	case 'H', 'f': // CUP, HVP
		t.moveTo(n-1, param(params, 1, 1)-1)
	case 'I': // CHT
		t.tab(n)
	case 'Z': // CBT
		t.backTab(n)
	case 'd': // VPA
		t.moveTo(n-1, t.cur.col)
	case 'r': // DECSTBM
		top, bot := param(params, 0, 1)-1, param(params, 1, t.rows)-1
		bot = min(bot, t.rows-1)
		if top < bot {
			t.top, t.bot = top, bot
			t.moveTo(0, 0)
		}
	case 's': // SCOSC
		t.saveCursor()
	case 'u': // SCORC
		t.restoreCursor()
	default:
		return false
	}
	return true
}

// csiEdit runs the CSI sequences that insert, erase, delete or scroll (n is
// the first parameter, 1 when missing); it reports whether final was one of
// them.
func (t *Terminal) csiEdit(final byte, params []int, n int) bool {
	switch final {
	case '@': // ICH
		t.cur.pendingWrap = false
		t.insertBlanks(t.screen()[t.cur.row], t.cur.col, n)
	case 'J': // ED
		t.cur.pendingWrap = false
		t.eraseDisplay(param(params, 0, 0))
	case 'K': // EL
		t.cur.pendingWrap = false
		t.eraseLine(param(params, 0, 0))
	case 'L', 'M': // IL, DL: only inside the scroll region
		if t.cur.row < t.top || t.cur.row > t.bot {
			return true
		}
		if final == 'L' {
			t.scrollDown(t.cur.row, t.bot, n)
		} else {
			t.scrollUp(t.cur.row, t.bot, n, false)
		}
		t.cur.col = 0
		t.cur.pendingWrap = false
	case 'P': // DCH
		t.cur.pendingWrap = false
		t.deleteChars(t.screen()[t.cur.row], t.cur.col, n)
	case 'S': // SU
		t.scrollUp(t.top, t.bot, n, true)
	case 'T': // SD (with more than one parameter it is mouse tracking)
		if len(params) <= 1 {
			t.scrollDown(t.top, t.bot, n)
		}
	case 'X': // ECH
		t.cur.pendingWrap = false
		t.eraseRange(t.screen()[t.cur.row], t.cur.col, t.cur.col+n)
	case 'b': // REP
		if t.last != 0 {
			for i := min(n, t.rows*t.cols); i > 0; i-- {
				t.print(t.last)
			}
		}
	default:
		return false
	}
	return true
}

// csiReport runs the CSI sequences that answer the host or set tab stops and
// ANSI modes; the others it ignores.
func (t *Terminal) csiReport(final byte, params []int) {
	switch final {
	case 'c': // DA1: a VT220 with nothing optional
		if param(params, 0, 0) == 0 {
			t.answer("\x1b[?62;22c")
		}
	case 'g': // TBC
		switch param(params, 0, 0) {
		case 0:
			t.tabs[t.cur.col] = false
		case 3:
			clear(t.tabs)
		}
	case 'h', 'l': // SM, RM
		for _, m := range params {
			switch m {
			case 4:
				t.insert = final == 'h'
			case 20:
				t.newline = final == 'h'
			}
		}
	case 'n': // DSR
		switch param(params, 0, 0) {
		case 5:
			t.answer("\x1b[0n")
		case 6:
			row := t.cur.row
			if t.origin {
				row -= t.top
			}
			t.answer("\x1b[" + strconv.Itoa(row+1) + ";" + strconv.Itoa(t.cur.col+1) + "R")
		}
	}
}

func (t *Terminal) decModes(params []int, on bool) {
	for _, m := range params {
		switch m {
		case 1: // DECCKM
			t.appCursor = on
		case 2004:
			t.paste = on
		case 6: // DECOM
			t.origin = on
			t.moveTo(0, 0)
		case 7: // DECAWM
			t.autowrap = on
			if !on {
				t.cur.pendingWrap = false
			}
		case 25: // DECTCEM
			t.visible = on
		case 47:
			t.setAlt(on, false)
		case 1047:
			if !on && t.altActive {
				for _, line := range t.alt {
					clear(line)
				}
			}
			t.setAlt(on, false)
		case 1048:
			if on {
				t.saveCursor()
			} else {
				t.restoreCursor()
			}
		case 1049:
			if on {
				if !t.altActive {
					t.saveCursor()
				}
				t.setAlt(true, true)
			} else if t.altActive {
				t.setAlt(false, false)
				t.restoreCursor()
			}
		}
	}
}

func (t *Terminal) softReset() {
	t.visible = true
	t.appCursor = false
	t.top, t.bot = 0, t.rows-1
	t.origin = false
	t.autowrap = true
	t.insert = false
	t.charsets = [2]bool{}
	t.gl = 0
	t.savedMain = savedCursor{autowrap: true}
	t.savedAlt = savedCursor{autowrap: true}
	t.cur.pendingWrap = false
}

func (t *Terminal) answer(s string) {
	if t.reply != nil && len(t.out) < 4096 {
		t.out = append(t.out, s...)
	}
}

const maxTitle = 256 // runes

func (t *Terminal) oscDispatch(data []byte) {
	ps, pt, ok := strings.Cut(string(data), ";")
	if !ok || (ps != "0" && ps != "2") {
		return
	}
	var b strings.Builder
	n := 0
	for _, r := range pt {
		if r == 0xFFFD || !unicode.IsPrint(r) && r != ' ' {
			continue
		}
		if n == maxTitle {
			break
		}
		b.WriteRune(r)
		n++
	}
	t.title = b.String()
}

// decSpecial maps 0x5F..0x7E in the DEC special graphics set (ESC ( 0),
// which programs use for line drawing.
var decSpecial = [32]rune{
	' ', '◆', '▒', '␉', '␌', '␍', '␊', '°', '±', '␤', '␋', '┘', '┐', '┌', '└', '┼',
	'⎺', '⎻', '─', '⎼', '⎽', '├', '┤', '┴', '┬', '│', '≤', '≥', 'π', '≠', '£', '·',
}
