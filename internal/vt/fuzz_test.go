package vt

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzWrite feeds arbitrary bytes, split at an arbitrary point and with a
// resize in between, and checks what every reader relies on: no panic, a
// screen of exactly Rows lines each at most Cols cells wide, the cursor on
// the screen, the scrollback within its bounds, valid UTF-8 everywhere.
func FuzzWrite(f *testing.F) {
	seeds := []string{
		"hello\r\nworld",
		"\x1b[2J\x1b[H\x1b[3;4Hx\x1b[?1049h\x1b[10;20r\x1bM\x1bD\x1bE",
		"日本語😀e\u0301\t\b\x1b[@\x1b[P\x1b[X\x1b[L\x1b[M\x1b[S\x1b[T",
		"\x1b]0;title\x07\x1bPq\x1b\\\x1b_x\x1b\\\x1b(0lqk\x1b(B",
		"\x1b[?6h\x1b[5;2r\x1b[99;99H\x1b7\x1b[?47h\x1b8\x1b[?1049l\x1bc",
		"\x1b[4habc\x1b[4l\x1b[20h\n\x1b[?7lxxxxxxxxxxxxxxxxxxxxxxxxx\x1b[3g\x1bH\t\x1b[Z\x1b[5b",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint8(len(s)/2), uint8(5), uint8(12), uint8(3), uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, split, rows, cols, rows2, cols2 uint8) {
		const maxLines, maxBytes = 8, 64
		term := New(int(rows%40), int(cols%90), Options{ScrollbackLines: maxLines, ScrollbackBytes: maxBytes})
		cut := min(int(split), len(data))
		term.Write(data[:cut])
		check(t, term, maxLines, maxBytes)
		term.Resize(int(rows2%40), int(cols2%90))
		check(t, term, maxLines, maxBytes)
		term.Write(data[cut:])
		check(t, term, maxLines, maxBytes)
		if s := Sanitize(data); !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) || strings.ContainsRune(s, 0x1b) {
			t.Fatalf("Sanitize gave %q", s)
		}
	})
}

func check(t *testing.T, term *Terminal, maxLines, maxBytes int) {
	t.Helper()
	s := term.Snapshot()
	if s.Rows < 1 || s.Cols < 1 || len(s.Lines) != s.Rows {
		t.Fatalf("%d lines for %dx%d", len(s.Lines), s.Rows, s.Cols)
	}
	for i, l := range s.Lines {
		if !utf8.ValidString(l) || strings.HasSuffix(l, " ") {
			t.Fatalf("line %d %q", i, l)
		}
		cells := 0
		for _, r := range l {
			cells += runeWidth(r)
		}
		if cells > s.Cols {
			t.Fatalf("line %d %q takes %d cells on a %d-column screen", i, l, cells, s.Cols)
		}
	}
	if s.CursorRow < 0 || s.CursorRow >= s.Rows || s.CursorCol < 0 || s.CursorCol >= s.Cols {
		t.Fatalf("cursor %d,%d outside %dx%d", s.CursorRow, s.CursorCol, s.Rows, s.Cols)
	}
	lines, total := term.Scrollback(0, 0)
	bytes := 0
	for _, l := range lines {
		bytes += len(l)
	}
	if total != len(lines) || total > maxLines || bytes > maxBytes {
		t.Fatalf("scrollback %d lines (%d reported), %d bytes", len(lines), total, bytes)
	}
}
