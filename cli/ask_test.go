package cli_test

import (
	"strings"
	"testing"
)

func TestAskWithoutAdviserIsOneClearLine(t *testing.T) {
	d := start(t) // no API key: the adviser is unavailable
	_, errOut := expect(t, d, 1, "ask", "what does ls do?")
	line := strings.TrimSpace(errOut)
	if strings.Contains(line, "\n") || !strings.Contains(line, "adviser is unavailable") {
		t.Fatalf("want one line saying the adviser is unavailable, got %q", errOut)
	}
	expect(t, d, 2, "ask")
	expect(t, d, 2, "ask", "--explain", "a", "--suggest", "b")
}
