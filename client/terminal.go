package client

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// SendInput sends input to a PTY execution; with a wait, the call may take
// the wait's timeout (0: the daemon's 10 s), longer than an ordinary call.
func (c *Client) SendInput(ctx context.Context, r *termdv1.SendInputRequest) (*termdv1.SendInputResponse, error) {
	if r.GetWait().GetWait() {
		d := time.Duration(r.GetWait().GetTimeoutMs()) * time.Millisecond
		if d == 0 {
			d = 10 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d+30*time.Second)
		defer cancel()
	}
	return c.Terminals.SendInput(ctx, r)
}

// ParseKey reads a key name as users write it: "enter", "Ctrl-C",
// "ctrl_c", "PAGE_UP", "pageup".
func ParseKey(name string) (termdv1.TerminalKey, error) {
	n := strings.ToUpper(strings.NewReplacer("-", "_", " ", "_", "+", "_").Replace(strings.TrimSpace(name)))
	n = strings.TrimPrefix(n, "TERMINAL_KEY_")
	aliases := map[string]string{"RETURN": "ENTER", "ESC": "ESCAPE", "PGUP": "PAGE_UP", "PAGEUP": "PAGE_UP", "PGDN": "PAGE_DOWN", "PAGEDOWN": "PAGE_DOWN", "BS": "BACKSPACE", "^C": "CTRL_C", "^D": "CTRL_D", "^Z": "CTRL_Z"}
	if a, ok := aliases[n]; ok {
		n = a
	}
	if v, ok := termdv1.TerminalKey_value["TERMINAL_KEY_"+n]; ok && v != 0 {
		return termdv1.TerminalKey(v), nil
	}
	return 0, fmt.Errorf("unknown key %q: use one of %s", name, strings.Join(KeyNames(), ", "))
}

// KeyNames are the key names ParseKey accepts (canonical spellings).
func KeyNames() []string {
	var out []string
	for v, n := range termdv1.TerminalKey_name {
		if v != 0 {
			out = append(out, strings.ToLower(strings.TrimPrefix(n, "TERMINAL_KEY_")))
		}
	}
	sort.Strings(out)
	return out
}

// ReadyWord is a ready reason in words: "waiting_for_input", "quiet", ...
func ReadyWord(r termdv1.ReadyReason) string {
	if r == termdv1.ReadyReason_READY_REASON_UNSPECIFIED {
		return "not waited"
	}
	return strings.ToLower(strings.TrimPrefix(r.String(), "READY_REASON_"))
}

// ScreenText is a screen's lines without the blank ones at the bottom.
func ScreenText(s *termdv1.Screen) string {
	lines := s.GetLines()
	n := len(lines)
	for n > 0 && strings.TrimSpace(lines[n-1]) == "" {
		n--
	}
	return strings.Join(lines[:n], "\n")
}
