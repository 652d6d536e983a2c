package vt

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// screenCase feeds in to a rows×cols terminal and expects the screen (lines
// joined by "|", trailing empty lines left out) and the cursor.
type screenCase struct {
	name       string
	rows, cols int
	in         string
	want       string
	row, col   int
}

func runScreenCases(t *testing.T, cases []screenCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			term := New(c.rows, c.cols, Options{})
			term.Write([]byte(c.in))
			s := term.Snapshot()
			if len(s.Lines) != c.rows {
				t.Fatalf("%d lines, want %d", len(s.Lines), c.rows)
			}
			got := strings.Join(s.Lines, "|")
			got = strings.TrimRight(got, "|")
			if got != c.want {
				t.Errorf("screen %q, want %q", got, c.want)
			}
			if s.CursorRow != c.row || s.CursorCol != c.col {
				t.Errorf("cursor at %d,%d, want %d,%d", s.CursorRow, s.CursorCol, c.row, c.col)
			}
		})
	}
}

func TestText(t *testing.T) {
	runScreenCases(t, []screenCase{
		{"plain", 3, 10, "hello", "hello", 0, 5},
		{"CR LF", 3, 10, "ab\r\ncd", "ab|cd", 1, 2},
		{"LF keeps the column", 3, 10, "ab\ncd", "ab|  cd", 1, 4},
		{"CR overwrites", 3, 10, "hello\rJ", "Jello", 0, 1},
		{"BS then overwrite", 3, 10, "abc\b\bX", "aXc", 0, 2},
		{"BS stops at the left", 3, 10, "\b\bab", "ab", 0, 2},
		{"TAB", 3, 20, "a\tb\tc", "a       b       c", 0, 17},
		{"TAB stops at the right edge", 3, 10, "a\t\t\tb", "a        b", 0, 9},
		{"CHT and CBT", 3, 30, "\x1b[2Ix\x1b[2Zy", "        y       x", 0, 9},
		{"HTS and TBC", 3, 20, "\x1b[3g  \x1bH\r\tx", "  x", 0, 3},
		{"UTF-8", 2, 10, "héllo ✓", "héllo ✓", 0, 7},
		{"wide CJK takes two cells", 2, 10, "日本語x", "日本語x", 0, 7},
		{"emoji is wide", 2, 10, "a😀b", "a😀b", 0, 4},
		{"combining mark joins its letter", 2, 10, "e\u0301x", "e\u0301x", 0, 2},
		{"wide character at the last column wraps", 2, 5, "abcd日", "abcd|日", 1, 2},
		{"overwriting half a wide character blanks it", 2, 10, "日本\rx", "x 本", 0, 1},
		{"invalid UTF-8 is dropped", 2, 10, "a\xffb\xc3(c", "ab(c", 0, 4},
		{"C1 controls as UTF-8 are dropped", 2, 10, "a\u0085b", "ab", 0, 2},
		{"BEL and other C0 do nothing", 2, 10, "a\x07\x01\x00b", "ab", 0, 2},
		{"DEC special graphics", 2, 10, "\x1b(0lqk\x1b(Bx", "┌─┐x", 0, 4},
		{"SO/SI switch to G1", 2, 10, "\x1b)0\x0eq\x0fq", "─q", 0, 2},
		{"LNM: LF returns the carriage", 3, 10, "\x1b[20hab\ncd", "ab|cd", 1, 2},
	})
}

func TestAutowrap(t *testing.T) {
	runScreenCases(t, []screenCase{
		{"pending wrap keeps the cursor on the last column", 3, 5, "abcde", "abcde", 0, 4},
		{"the next character wraps", 3, 5, "abcdef", "abcde|f", 1, 1},
		{"CR in pending wrap stays on the line", 3, 5, "abcde\rX", "Xbcde", 0, 1},
		{"CRLF after a full line makes no blank line", 3, 5, "abcde\r\nf", "abcde|f", 1, 1},
		{"wrap at the bottom scrolls", 2, 3, "abcdefg", "def|g", 1, 1},
		{"DECAWM off overwrites the last column", 3, 5, "\x1b[?7labcdefg", "abcdg", 0, 4},
		{"BS from pending wrap", 3, 5, "abcde\bX", "abcXe", 0, 4},
		{"cursor movement cancels the pending wrap", 3, 5, "abcde\x1b[DX", "abcXe", 0, 4},
	})
}

func TestCursorMovement(t *testing.T) {
	runScreenCases(t, []screenCase{
		{"CUP", 5, 10, "\x1b[3;4Hx", "||   x", 2, 4},
		{"CUP defaults home", 5, 10, "abc\x1b[Hx", "xbc", 0, 1},
		{"CUP clamps", 5, 10, "\x1b[99;99Hx", "||||         x", 4, 9},
		{"HVP", 5, 10, "\x1b[2;2fx", "| x", 1, 2},
		{"CUU", 5, 10, "\x1b[5;1H\x1b[2Ax", "||x", 2, 1},
		{"CUU stops at the top", 5, 10, "\x1b[2;1H\x1b[9Ax", "x", 0, 1},
		{"CUD", 5, 10, "\x1b[2Bx", "||x", 2, 1},
		{"CUD default 1", 5, 10, "\x1b[Bx", "|x", 1, 1},
		{"CUF", 5, 10, "\x1b[3Cx", "   x", 0, 4},
		{"CUF stops at the right", 5, 10, "\x1b[99Cx", "         x", 0, 9},
		{"CUB", 5, 10, "abcd\x1b[2Dx", "abxd", 0, 3},
		{"CHA", 5, 10, "abcd\x1b[2Gx", "axcd", 0, 2},
		{"HPA", 5, 10, "abcd\x1b[3`x", "abxd", 0, 3},
		{"VPA keeps the column", 5, 10, "ab\x1b[3dx", "ab||  x", 2, 3},
		{"CNL", 5, 10, "abc\x1b[2Ex", "abc||x", 2, 1},
		{"CPL", 5, 10, "\x1b[4;5H\x1b[2Fx", "|x", 1, 1},
		{"HPR and VPR", 5, 10, "\x1b[2a\x1b[1ex", "|  x", 1, 3},
		{"zero parameter means one", 5, 10, "\x1b[3;3H\x1b[0Ax", "|  x", 1, 3},
		{"C0 inside a sequence acts", 5, 10, "ab\x1b[\r2Cx", "abx", 0, 3},
		{"DECSC/DECRC", 5, 10, "\x1b[2;3H\x1b7\x1b[5;5H\x1b8x", "|  x", 1, 3},
		{"SCOSC/SCORC", 5, 10, "\x1b[2;3H\x1b[s\x1b[5;5H\x1b[ux", "|  x", 1, 3},
		{"DECRC without DECSC goes home", 5, 10, "\x1b[3;3H\x1b8x", "x", 0, 1},
		{"DECSC keeps the pending wrap", 3, 3, "abc\x1b7\x1b[H\x1b8d", "abc|d", 1, 1},
		{"sequence split across writes", 5, 10, "\x1b[3;4Hx", "||   x", 2, 4},
		{"unknown private CSI ignored", 5, 10, "a\x1b[>4;1mb\x1b[=5ub", "abb", 0, 3},
		{"too many parameters", 5, 10, "\x1b[1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;2Hx", "x", 0, 1},
		{"huge parameter", 5, 10, "\x1b[99999999999999999999Cx", "         x", 0, 9},
	})
}

func TestErase(t *testing.T) {
	full := "abcde\r\nfghij\r\nklmno"
	runScreenCases(t, []screenCase{
		{"ED 0", 3, 5, full + "\x1b[2;3H\x1b[J", "abcde|fg", 1, 2},
		{"ED 1", 3, 5, full + "\x1b[2;3H\x1b[1J", "|   ij|klmno", 1, 2},
		{"ED 2 keeps the cursor", 3, 5, full + "\x1b[2;3H\x1b[2J", "", 1, 2},
		{"EL 0", 3, 5, full + "\x1b[2;3H\x1b[K", "abcde|fg|klmno", 1, 2},
		{"EL 1", 3, 5, full + "\x1b[2;3H\x1b[1K", "abcde|   ij|klmno", 1, 2},
		{"EL 2", 3, 5, full + "\x1b[2;3H\x1b[2K", "abcde||klmno", 1, 2},
		{"ECH", 3, 5, full + "\x1b[2;2H\x1b[2X", "abcde|f  ij|klmno", 1, 1},
		{"ECH past the end", 3, 5, full + "\x1b[2;4H\x1b[9X", "abcde|fgh|klmno", 1, 3},
		{"ICH", 3, 5, full + "\x1b[2;2H\x1b[2@", "abcde|f  gh|klmno", 1, 1},
		{"DCH", 3, 5, full + "\x1b[2;2H\x1b[2P", "abcde|fij|klmno", 1, 1},
		{"DCH of a wide character's half", 3, 6, "a日b\x1b[1;3H\x1b[P", "a b", 0, 2},
		{"IL", 3, 5, full + "\x1b[2;3H\x1b[L", "abcde||fghij", 1, 0},
		{"DL", 3, 5, full + "\x1b[1;3H\x1b[M", "fghij|klmno", 0, 0},
		{"DL many", 3, 5, full + "\x1b[2;3H\x1b[9M", "abcde", 1, 0},
		{"insert mode", 3, 6, "abc\x1b[4h\x1b[1GX\x1b[4lY", "XYbc", 0, 2},
		{"EL 0 in pending wrap erases the last column", 3, 5, "abcde\x1b[K", "abcd", 0, 4},
		{"DECALN", 2, 3, "\x1b#8", "EEE|EEE", 0, 0},
		{"REP", 2, 10, "a\x1b[3bx", "aaaax", 0, 5},
	})
}

func TestScroll(t *testing.T) {
	lines := "1\r\n2\r\n3\r\n4"
	runScreenCases(t, []screenCase{
		{"LF at the bottom scrolls", 3, 5, lines, "2|3|4", 2, 1},
		{"SU", 4, 5, lines + "\x1b[2S", "3|4", 3, 1},
		{"SD", 4, 5, lines + "\x1b[2T", "||1|2", 3, 1},
		{"IND at the bottom", 3, 5, "1\r\n2\r\n3\x1bDx", "2|3| x", 2, 2},
		{"NEL", 3, 5, "ab\x1bEx", "ab|x", 1, 1},
		{"RI at the top scrolls down", 3, 5, "1\r\n2\r\n3\x1b[H\x1bMx", "x|1|2", 0, 1},
		{"RI moves up", 3, 5, "1\r\n2\x1bMx", "1x|2", 0, 2},
		{"DECSTBM homes the cursor", 5, 5, "\x1b[2;4rx", "x", 0, 1},
		{"LF scrolls only the region", 5, 5, "1\r\n2\r\n3\r\n4\r\n5\x1b[2;4r\x1b[4;1H\r\nx", "1|3|4|x|5", 3, 1},
		{"RI scrolls only the region", 5, 5, "1\r\n2\r\n3\r\n4\r\n5\x1b[2;4r\x1b[2;1H\x1bMx", "1|x|2|3|5", 1, 1},
		{"SU scrolls only the region", 5, 5, "1\r\n2\r\n3\r\n4\r\n5\x1b[2;4r\x1b[S", "1|3|4||5", 0, 0},
		{"IL inside the region", 5, 5, "1\r\n2\r\n3\r\n4\r\n5\x1b[2;4r\x1b[3;1H\x1b[L", "1|2||3|5", 2, 0},
		{"IL outside the region does nothing", 5, 5, "1\r\n2\r\n3\r\n4\r\n5\x1b[2;4r\x1b[5;1H\x1b[L", "1|2|3|4|5", 4, 0},
		{"LF below the region stops at the bottom", 5, 5, "\x1b[2;3r\x1b[5;1H\n\nx", "||||x", 4, 1},
		{"CUD stops at the region's bottom", 5, 5, "\x1b[2;3r\x1b[2;1H\x1b[9Bx", "||x", 2, 1},
		{"invalid region ignored", 3, 5, "1\r\n2\r\n3\x1b[3;2r\r\nx", "2|3|x", 2, 1},
		{"origin mode", 5, 5, "\x1b[2;4r\x1b[?6h\x1b[1;1Hx\x1b[9;1Hy", "|x||y", 3, 1},
		{"DECSTR resets the region", 5, 5, "\x1b[2;3r\x1b[!p\x1b[3;1H\nx", "|||x", 3, 1},
	})
}

func TestScrollbackKeepsLinesLeavingTheTop(t *testing.T) {
	term := New(3, 10, Options{})
	for i := 1; i <= 10; i++ {
		term.Write([]byte("line " + itoa(i) + "\r\n"))
	}
	lines, total := term.Scrollback(0, 0)
	want := []string{"line 1", "line 2", "line 3", "line 4", "line 5", "line 6", "line 7", "line 8"}
	if total != 8 || !slices.Equal(lines, want) {
		t.Fatalf("scrollback %q (total %d), want %q", lines, total, want)
	}
	if got := term.Snapshot().Text(); got != "line 9\nline 10" {
		t.Fatalf("screen %q", got)
	}
	page, total := term.Scrollback(6, 5)
	if total != 8 || !slices.Equal(page, []string{"line 7", "line 8"}) {
		t.Fatalf("page %q", page)
	}
	if page, _ := term.Scrollback(50, 5); len(page) != 0 {
		t.Fatalf("page past the end %q", page)
	}
	// A scroll region that does not start at the top keeps nothing, nor
	// does the alternate screen.
	term.Write([]byte("\x1b[2;3r\x1b[3;1H\n\n\n\x1b[r\x1b[?1049h\n\n\n\n\x1b[?1049l"))
	if _, total := term.Scrollback(0, 0); total != 8 {
		t.Fatalf("total %d after region and alt-screen scrolling, want 8", total)
	}
	// ED 3 clears it.
	term.Write([]byte("\x1b[3J"))
	if _, total := term.Scrollback(0, 0); total != 0 {
		t.Fatalf("total %d after ED 3", total)
	}
}

func TestScrollbackBounds(t *testing.T) {
	term := New(2, 20, Options{ScrollbackLines: 5})
	for i := 1; i <= 20; i++ {
		term.Write([]byte("line " + itoa(i) + "\r\n"))
	}
	lines, total := term.Scrollback(0, 0)
	if total != 5 || lines[0] != "line 15" || lines[4] != "line 19" {
		t.Fatalf("line bound: %q", lines)
	}
	if d := term.ScrollbackDropped(); d != 14 {
		t.Fatalf("dropped %d, want 14", d)
	}
	term = New(2, 20, Options{ScrollbackBytes: 20})
	for i := 1; i <= 20; i++ {
		term.Write([]byte("line " + itoa(i+10) + "\r\n")) // 7 bytes each
	}
	lines, total = term.Scrollback(0, 0)
	if total != 2 || lines[0] != "line 28" || lines[1] != "line 29" {
		t.Fatalf("byte bound: %q", lines)
	}
	term = New(2, 20, Options{ScrollbackLines: -1})
	term.Write([]byte("a\r\nb\r\nc\r\nd\r\n"))
	if _, total := term.Scrollback(0, 0); total != 0 {
		t.Fatalf("negative bound kept %d lines", total)
	}
}

func TestAltScreen(t *testing.T) {
	for _, mode := range []string{"1049", "1047", "47"} {
		t.Run(mode, func(t *testing.T) {
			term := New(3, 12, Options{})
			term.Write([]byte("main\r\nprompt$ "))
			term.Write([]byte("\x1b[?" + mode + "h\x1b[H\x1b[2Jfull screen\x1b[3;1H:"))
			s := term.Snapshot()
			if !s.AltScreen || s.Text() != "full screen\n\n:" {
				t.Fatalf("alt screen %+v", s)
			}
			term.Write([]byte("\x1b[?" + mode + "l"))
			s = term.Snapshot()
			if s.AltScreen || s.Text() != "main\nprompt$" {
				t.Fatalf("main screen after leaving %+v", s)
			}
			if mode == "1049" && (s.CursorRow != 1 || s.CursorCol != 8) {
				t.Fatalf("1049 restores the cursor: at %d,%d", s.CursorRow, s.CursorCol)
			}
		})
	}
	// 1049 starts from a clear alternate screen each time; 47 keeps it.
	term := New(3, 10, Options{})
	term.Write([]byte("\x1b[?1049hold\x1b[?1049l\x1b[?1049h"))
	if s := term.Snapshot(); s.Text() != "" {
		t.Fatalf("1049 did not clear: %q", s.Text())
	}
	term = New(3, 10, Options{})
	term.Write([]byte("\x1b[?47hold\x1b[?47l\x1b[?47h"))
	if s := term.Snapshot(); s.Text() != "old" {
		t.Fatalf("47 lost the alternate screen: %q", s.Text())
	}
}

func TestModesTitleAndStrings(t *testing.T) {
	term := New(3, 20, Options{})
	term.Write([]byte("\x1b[?25l"))
	if term.Snapshot().CursorVisible {
		t.Fatal("DECTCEM l left the cursor visible")
	}
	term.Write([]byte("\x1b[?1h\x1b[?2004h"))
	if s := term.Snapshot(); !s.AppCursorKeys || !s.BracketedPaste {
		t.Fatalf("DECCKM %v, bracketed paste %v", s.AppCursorKeys, s.BracketedPaste)
	}
	term.Write([]byte("\x1b[?2004l\x1b[!p"))
	if s := term.Snapshot(); s.AppCursorKeys || s.BracketedPaste {
		t.Fatalf("after ?2004l and DECSTR: DECCKM %v, bracketed paste %v", s.AppCursorKeys, s.BracketedPaste)
	}
	term.Write([]byte("\x1b[?25h\x1b]0;first\x07\x1b]2;sec"))
	term.Write([]byte("ond\x1b\\\x1b]1;icon only\x07"))
	s := term.Snapshot()
	if !s.CursorVisible || s.Title != "second" {
		t.Fatalf("cursor visible %v, title %q", s.CursorVisible, s.Title)
	}
	// SGR, DCS, APC, PM, SOS and OSC 8 hyperlinks leave only the text.
	term.Write([]byte("\x1b[1;31;48;2;1;2;3mred\x1b[0m \x1bPq#0;2;0;0;0\x1b\\" +
		"\x1b_apc\x07\x1b^pm\x1b\\\x1bXsos\x1b\\\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\!"))
	if got := term.Snapshot().Lines[0]; got != "red link!" {
		t.Fatalf("line %q", got)
	}
	// RIS clears the screen and modes but keeps the scrollback.
	term.Write([]byte("\x1b[?25l\x1b[?1049hx\x1bc"))
	s = term.Snapshot()
	if s.AltScreen || !s.CursorVisible || s.Text() != "" || s.CursorRow != 0 || s.CursorCol != 0 {
		t.Fatalf("after RIS %+v", s)
	}
}

func TestSplitWrites(t *testing.T) {
	in := "\x1b[2J\x1b[1;1H日本\x1b]0;tïtle\x07\x1b[31mred\x1b[0m\r\n\x1b[?1049h\x1b[?1049l✓ done\x1bPdcs\x1b\\!"
	whole := New(4, 20, Options{})
	whole.Write([]byte(in))
	want := whole.Snapshot()
	for split := 1; split < len(in); split++ {
		term := New(4, 20, Options{})
		term.Write([]byte(in[:split]))
		term.Write([]byte(in[split:]))
		if got := term.Snapshot(); !slices.Equal(got.Lines, want.Lines) || got.Title != want.Title ||
			got.CursorCol != want.CursorCol || got.CursorRow != want.CursorRow {
			t.Fatalf("split at %d: %+v, want %+v", split, got, want)
		}
	}
	// One byte at a time too.
	term := New(4, 20, Options{})
	for i := range len(in) {
		term.Write([]byte{in[i]})
	}
	if got := term.Snapshot(); !slices.Equal(got.Lines, want.Lines) {
		t.Fatalf("byte by byte: %q", got.Lines)
	}
	if want.Lines[0] != "日本red" || want.Lines[1] != "✓ done!" || want.Title != "tïtle" {
		t.Fatalf("screen %q title %q", want.Lines, want.Title)
	}
}

func TestResize(t *testing.T) {
	term := New(5, 10, Options{})
	term.Write([]byte("1\r\n2\r\n3\r\n4\r\n5 abcdefgh"))
	term.Resize(3, 6)
	s := term.Snapshot()
	if got := strings.Join(s.Lines, "|"); got != "3|4|5 abcd" || s.CursorRow != 2 || s.CursorCol != 5 {
		t.Fatalf("shrunk: %q cursor %d,%d", got, s.CursorRow, s.CursorCol)
	}
	if lines, _ := term.Scrollback(0, 0); !slices.Equal(lines, []string{"1", "2"}) {
		t.Fatalf("lines pushed up went to the scrollback: %q", lines)
	}
	term.Resize(4, 12)
	term.Write([]byte("\r\nnew line"))
	s = term.Snapshot()
	if got := strings.Join(s.Lines, "|"); got != "3|4|5 abcd|new line" {
		t.Fatalf("grown: %q", got)
	}
	// The cursor near the top: shrinking drops the bottom lines instead.
	term = New(4, 10, Options{})
	term.Write([]byte("top\r\n\r\n\r\nbottom\x1b[1;4H"))
	term.Resize(2, 10)
	if s := term.Snapshot(); s.Text() != "top" || s.CursorRow != 0 || s.CursorCol != 3 {
		t.Fatalf("shrunk with the cursor at the top: %+v", s)
	}
	// A wide character cut in half by a narrower screen is blanked.
	term = New(2, 4, Options{})
	term.Write([]byte("ab日"))
	term.Resize(2, 3)
	if s := term.Snapshot(); s.Lines[0] != "ab" {
		t.Fatalf("cut wide char: %q", s.Lines[0])
	}
	term.Resize(0, -5)
	if s := term.Snapshot(); s.Rows != 1 || s.Cols != 1 {
		t.Fatalf("size %dx%d, want 1x1", s.Rows, s.Cols)
	}
	term.Resize(1<<30, 1<<30)
	if s := term.Snapshot(); s.Rows != MaxRows || s.Cols != MaxCols {
		t.Fatalf("size %dx%d, want the maximum", s.Rows, s.Cols)
	}
}

func TestReplies(t *testing.T) {
	var got []string
	term := New(5, 10, Options{Reply: func(p []byte) { got = append(got, string(p)) }})
	term.Write([]byte("ab\x1b[3;4H\x1b[6n\x1b[5n\x1b[c\x1b[>c"))
	want := []string{"\x1b[3;4R\x1b[0n\x1b[?62;22c\x1b[>0;10;1c"}
	if !slices.Equal(got, want) {
		t.Fatalf("replies %q, want %q", got, want)
	}
	// Without Reply nothing is kept.
	term = New(5, 10, Options{})
	term.Write([]byte("\x1b[6n"))
	if len(term.out) != 0 {
		t.Fatal("answers kept without a Reply")
	}
}

func TestSnapshotText(t *testing.T) {
	s := Snapshot{Lines: []string{"", "a", "", "b", "", ""}}
	if s.Text() != "\na\n\nb" {
		t.Fatalf("%q", s.Text())
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Readers, Resize and Write from several goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	term := New(10, 40, Options{ScrollbackLines: 50})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 2000; i++ {
			term.Write([]byte("\x1b[32mline " + strconv.Itoa(i) + "\x1b[0m\r\n"))
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		s := term.Snapshot()
		if len(s.Lines) != s.Rows {
			t.Fatalf("%d lines for %d rows", len(s.Lines), s.Rows)
		}
		term.Scrollback(0, 10)
		term.Resize(10+len(s.Lines)%3, 40)
	}
	if got := term.Snapshot().Text(); !strings.HasSuffix(got, "line 1999") {
		t.Fatalf("screen ends %q", got)
	}
}
