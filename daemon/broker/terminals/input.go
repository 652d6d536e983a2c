package terminals

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// keyBytes are the bytes a named key sends (xterm, normal cursor mode).
var keyBytes = map[termdv1.TerminalKey]string{
	termdv1.TerminalKey_TERMINAL_KEY_ENTER:     "\r",
	termdv1.TerminalKey_TERMINAL_KEY_TAB:       "\t",
	termdv1.TerminalKey_TERMINAL_KEY_BACKSPACE: "\x7f",
	termdv1.TerminalKey_TERMINAL_KEY_ESCAPE:    "\x1b",
	termdv1.TerminalKey_TERMINAL_KEY_UP:        "\x1b[A",
	termdv1.TerminalKey_TERMINAL_KEY_DOWN:      "\x1b[B",
	termdv1.TerminalKey_TERMINAL_KEY_RIGHT:     "\x1b[C",
	termdv1.TerminalKey_TERMINAL_KEY_LEFT:      "\x1b[D",
	termdv1.TerminalKey_TERMINAL_KEY_HOME:      "\x1b[H",
	termdv1.TerminalKey_TERMINAL_KEY_END:       "\x1b[F",
	termdv1.TerminalKey_TERMINAL_KEY_PAGE_UP:   "\x1b[5~",
	termdv1.TerminalKey_TERMINAL_KEY_PAGE_DOWN: "\x1b[6~",
	termdv1.TerminalKey_TERMINAL_KEY_CTRL_C:    "\x03",
	termdv1.TerminalKey_TERMINAL_KEY_CTRL_D:    "\x04",
	termdv1.TerminalKey_TERMINAL_KEY_CTRL_Z:    "\x1a",
}

// keyName is how a key is shown in events and receipts: <ENTER>.
func keyName(k termdv1.TerminalKey) string {
	return "<" + strings.TrimPrefix(k.String(), "TERMINAL_KEY_") + ">"
}

// byteNames show control bytes of raw input by the key that sends them.
var byteNames = func() map[byte]string {
	m := map[byte]string{}
	for k, s := range keyBytes {
		if len(s) == 1 {
			m[s[0]] = keyName(k)
		}
	}
	return m
}()

// appCursorKeys are the keys that send ESC O x instead of ESC [ x when the
// program asked for application cursor keys (DECCKM: readline, less, vim).
var appCursorKeys = map[termdv1.TerminalKey]string{
	termdv1.TerminalKey_TERMINAL_KEY_UP:    "\x1bOA",
	termdv1.TerminalKey_TERMINAL_KEY_DOWN:  "\x1bOB",
	termdv1.TerminalKey_TERMINAL_KEY_RIGHT: "\x1bOC",
	termdv1.TerminalKey_TERMINAL_KEY_LEFT:  "\x1bOD",
	termdv1.TerminalKey_TERMINAL_KEY_HOME:  "\x1bOH",
	termdv1.TerminalKey_TERMINAL_KEY_END:   "\x1bOF",
}

// encodeInputs turns inputs into the bytes written to the terminal and the
// text shown for them (unredacted); appCursor is the screen's DECCKM.
func encodeInputs(in []*termdv1.TerminalInput, appCursor bool) ([]byte, string, error) {
	if len(in) == 0 {
		return nil, "", errdefs.Invalid("no input: send text, a line, a key or data (or only wait, with wait set)")
	}
	var raw []byte
	var shown strings.Builder
	for i, x := range in {
		switch v := x.GetInput().(type) {
		case *termdv1.TerminalInput_Text:
			raw = append(raw, v.Text...)
			shown.WriteString(v.Text)
		case *termdv1.TerminalInput_Line:
			raw = append(append(raw, v.Line...), '\r')
			shown.WriteString(v.Line + keyName(termdv1.TerminalKey_TERMINAL_KEY_ENTER))
		case *termdv1.TerminalInput_Key:
			b, ok := keyBytes[v.Key]
			if alt, has := appCursorKeys[v.Key]; has && appCursor {
				b = alt
			}
			if !ok {
				return nil, "", errdefs.Invalid("input %d: key %v is not a key termd knows; use one of ENTER, TAB, BACKSPACE, ESCAPE, UP, DOWN, LEFT, RIGHT, HOME, END, PAGE_UP, PAGE_DOWN, CTRL_C, CTRL_D, CTRL_Z", i+1, v.Key)
			}
			raw = append(raw, b...)
			shown.WriteString(keyName(v.Key))
		case *termdv1.TerminalInput_Data:
			raw = append(raw, v.Data...)
			shown.WriteString(showBytes(v.Data))
		default:
			return nil, "", errdefs.Invalid("input %d is empty: set text, line, key or data", i+1)
		}
		if len(raw) > maxInputBytes {
			return nil, "", errdefs.Invalid("input of more than %d bytes in one send; send it in pieces", maxInputBytes)
		}
	}
	return raw, shown.String(), nil
}

// showBytes shows raw keystrokes as text: control bytes by key name.
func showBytes(p []byte) string {
	var b strings.Builder
	for len(p) > 0 {
		if n, ok := byteNames[p[0]]; ok {
			b.WriteString(n)
			p = p[1:]
			continue
		}
		r, size := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, "<0x%02x>", p[0])
		case r < 0x20:
			fmt.Fprintf(&b, "<CTRL_%c>", r+'@')
		default:
			b.WriteRune(r)
		}
		p = p[size:]
	}
	return b.String()
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes)", len(s))
}
