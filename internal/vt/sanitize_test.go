package vt

import "testing"

func TestSanitize(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "hello\nworld\n", "hello\nworld\n"},
		{"colours", "\x1b[1;32mok\x1b[0m \x1b[38;5;208mwarn\x1b[m\n", "ok warn\n"},
		{"progress bar with CR", "[#   ] 25%\r[##  ] 50%\r[####] 100%\ndone\n", "[####] 100%\ndone\n"},
		{"CRLF", "a\r\nb\r\n", "a\nb\n"},
		{"CR then shorter text", "abcdef\rXY", "XYcdef"},
		{"CR then erase line", "downloading 10%\r\x1b[Kdone", "done"},
		{"backspace overwrite", "abc\b\bXY\n", "aXY\n"},
		{"backspace erase", "abc\b \b\n", "ab\n"},
		{"tab kept", "a\tb\n", "a\tb\n"},
		{"OSC title and hyperlink", "\x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n", "link\n"},
		{"DCS and APC swallowed", "a\x1bPq#0\x1b\\b\x1b_apc\x1b\\c", "abc"},
		{"cursor movement dropped", "\x1b[2J\x1b[H\x1b[3;4Hx\x1b[?25l", "x"},
		{"control bytes dropped", "a\x00\x01\x07\x7fb\x1b(0c", "abc"},
		{"invalid UTF-8 dropped", "a\xffb\xc3c\xef\xbf\xbd日本", "abc日本"},
		{"C1 as UTF-8 dropped", "a\u0085\u009bb", "ab"},
		{"trailing spaces trimmed", "a   \nb  ", "a\nb"},
		{"combining mark kept", "e\u0301\n", "e\u0301\n"},
		{"CAN aborts a sequence", "\x1b[12\x18x", "x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Sanitize([]byte(c.in)); got != c.want {
				t.Errorf("Sanitize(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
