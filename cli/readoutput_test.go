package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// startExecution executes a plan without following and returns the execution id.
func startExecution(t *testing.T, d *harness.Daemon, planID string) string {
	t.Helper()
	ex := decode[struct {
		ID string `json:"id"`
	}](t, ok(t, d, "execute", planID, "-o", "json"))
	return ex.ID
}

func TestOutputByStreamAndOffset(t *testing.T) {
	d := start(t)
	id := startExecution(t, d, plan(t, d, nil, "echo", "abcdef").ID)
	if out := ok(t, d, "output", id, "--follow"); out != "abcdef\n" {
		t.Fatalf("output --follow: got %q", out)
	}
	if out := ok(t, d, "output", id, "--offset", "3"); out != "def\n" {
		t.Fatalf("output --offset 3: got %q", out)
	}
	res := decode[struct {
		Data       string `json:"data"`
		NextOffset int64  `json:"next_offset"`
		TotalBytes int64  `json:"total_bytes"`
		EOF        bool   `json:"eof"`
	}](t, ok(t, d, "output", id, "-o", "json"))
	if res.Data != "abcdef\n" || res.NextOffset != 7 || res.TotalBytes != 7 || !res.EOF {
		t.Fatalf("output -o json: %+v", res)
	}

	id = startExecution(t, d, plan(t, d, nil, "ls", filepath.Join(d.Workspace, "nonexistent-path")).ID)
	if out := ok(t, d, "output", id, "--follow", "--stream", "stderr"); !strings.Contains(out, "nonexistent-path") {
		t.Fatalf("--stream stderr should print ls's complaint, got %q", out)
	}
	if out := ok(t, d, "output", id); out != "" {
		t.Fatalf("stdout should be empty, got %q", out)
	}
	expect(t, d, 2, "output", id, "--stream", "both")
	expect(t, d, 1, "output", "no-such-execution")
}
