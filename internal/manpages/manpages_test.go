package manpages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEveryBinaryHasItsPages(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"termd.1", "termctl.1", "termctl-plan.1", "termctl-receipts-verify.1", "termd-mcp.1", "termd-gateway.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("no page %s: %v", page, err)
			continue
		}
		if !strings.Contains(string(b), ".SH NAME") || !strings.Contains(string(b), ".SH OPTIONS") {
			t.Errorf("%s is not a man page with NAME and OPTIONS:\n%.300s", page, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "termctl-gen-man.1")); err == nil {
		t.Error("no page should exist for a hidden command")
	}
}
