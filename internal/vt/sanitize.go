package vt

import "strings"

// Sanitize turns raw terminal output into plain text without emulating a
// screen: escape sequences (CSI, OSC, DCS, APC, ...) are dropped, a carriage
// return goes back to the start of the line so later text overwrites earlier
// text (a progress bar keeps its last state), backspace steps back one
// character, erase-in-line (CSI K) erases; newlines and tabs are kept, other
// control characters and invalid UTF-8 are dropped. Trailing spaces of each
// line are trimmed.
func Sanitize(p []byte) string {
	var s sanitizer
	var ps parser
	ps.feed(&s, p)
	s.flush(false)
	return s.out.String()
}

type sanitizer struct {
	out   strings.Builder
	cells []string // the current line, one entry per character
	col   int
}

func (s *sanitizer) flush(newline bool) {
	line := strings.TrimRight(strings.Join(s.cells, ""), " ")
	s.out.WriteString(line)
	if newline {
		s.out.WriteByte('\n')
	}
	s.cells = s.cells[:0]
	s.col = 0
}

func (s *sanitizer) put(c string) {
	for len(s.cells) < s.col {
		s.cells = append(s.cells, " ")
	}
	if s.col < len(s.cells) {
		s.cells[s.col] = c
	} else {
		s.cells = append(s.cells, c)
	}
	s.col++
}

func (s *sanitizer) print(r rune) {
	switch {
	case r == 0xFFFD, r >= 0x80 && r < 0xA0:
		return
	case runeWidth(r) == 0:
		if s.col > 0 && s.col <= len(s.cells) {
			s.cells[s.col-1] += string(r)
		}
		return
	}
	s.put(string(r))
}

func (s *sanitizer) execute(b byte) {
	switch b {
	case '\n':
		s.flush(true)
	case '\r':
		s.col = 0
	case '\b':
		if s.col > 0 {
			s.col--
		}
	case '\t':
		s.put("\t")
	}
}

func (s *sanitizer) escDispatch([]byte, byte) {}

func (s *sanitizer) oscDispatch([]byte) {}

func (s *sanitizer) csiDispatch(private byte, params []int, inter []byte, final byte) {
	if final != 'K' || private != 0 || len(inter) != 0 {
		return
	}
	switch param(params, 0, 0) {
	case 0:
		if s.col < len(s.cells) {
			s.cells = s.cells[:s.col]
		}
	case 1:
		for i := 0; i <= s.col && i < len(s.cells); i++ {
			s.cells[i] = " "
		}
	case 2:
		s.cells = s.cells[:0]
	}
}
