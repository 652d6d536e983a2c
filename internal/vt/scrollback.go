package vt

// scrollback holds the lines that scrolled off the top of the main screen,
// oldest first, within a bound on lines and on bytes; the oldest go first.
type scrollback struct {
	maxLines, maxBytes int
	lines              []string // lines[start:] are held
	start              int
	bytes              int
	dropped            int
}

func (s *scrollback) init(lines, bytes int) {
	if lines == 0 {
		lines = DefaultScrollbackLines
	}
	if bytes == 0 {
		bytes = DefaultScrollbackBytes
	}
	s.maxLines, s.maxBytes = max(lines, 0), max(bytes, 0)
}

func (s *scrollback) len() int { return len(s.lines) - s.start }

func (s *scrollback) push(line string) {
	if s.maxLines == 0 || len(line) > s.maxBytes {
		s.dropped++
		return
	}
	s.lines = append(s.lines, line)
	s.bytes += len(line)
	for s.len() > s.maxLines || s.bytes > s.maxBytes {
		s.bytes -= len(s.lines[s.start])
		s.lines[s.start] = ""
		s.start++
		s.dropped++
	}
	// Compact once the dropped head is as long as what is held.
	if s.start > 64 && s.start >= s.len() {
		n := copy(s.lines, s.lines[s.start:])
		clear(s.lines[n:])
		s.lines = s.lines[:n]
		s.start = 0
	}
}

func (s *scrollback) read(offset, limit int) ([]string, int) {
	total := s.len()
	offset = min(max(offset, 0), total)
	end := total
	if limit > 0 && limit < total-offset {
		end = offset + limit
	}
	out := make([]string, end-offset)
	copy(out, s.lines[s.start+offset:s.start+end])
	return out, total
}

func (s *scrollback) clear() {
	s.lines = nil
	s.start = 0
	s.bytes = 0
	s.dropped = 0
}
