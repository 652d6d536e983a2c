package cli_test

import (
	"strings"
	"testing"

	"github.com/termd/termd/daemon/adviser/fakeapi"
	"github.com/termd/termd/internal/harness"
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

func TestAskStreamsAdviceFromTheAdviser(t *testing.T) {
	api := fakeapi.New(t)
	t.Cleanup(api.Close)
	d := harness.Start(t, harness.Options{
		Config: "adviser:\n  base_url: " + api.URL + "\n  api_key_env: TERMD_TEST_ADVISER_KEY\n",
		Env:    []string{"TERMD_TEST_ADVISER_KEY=sk-termd-cli-test-key-0123456789"},
	})
	out := ok(t, d, "ask", "what does ls do?")
	if !strings.Contains(out, "This is a fake answer.") {
		t.Fatalf("the streamed answer is missing:\n%s", out)
	}
	out = ok(t, d, "ask", "--suggest", "free disk space FAKE:danger")
	if !strings.Contains(out, "termctl plan -- rm -rf /") {
		t.Fatalf("suggestions should be printed as plans to make, not run:\n%s", out)
	}
	// The suggestion was not run: nothing was planned or executed.
	if got := ok(t, d, "receipts", "list", "-o", "json"); strings.Contains(got, "rm -rf") {
		t.Fatalf("advice led to a receipt:\n%s", got)
	}
}
