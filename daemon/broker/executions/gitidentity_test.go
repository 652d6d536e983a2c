package executions

import "testing"

// The git identity file's values are quoted and escaped at every execution
// without building a string replacer each time (6 KiB and a dozen
// allocations a call).
func TestGitQuoteEscapesWithoutBuildingAReplacer(t *testing.T) {
	if got, want := gitQuote(`a "b" \c`), `"a \"b\" \\c"`; got != want {
		t.Fatalf("gitQuote: %s, want %s", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { _ = gitQuote(`Ada "the" Lovelace`) }); n > 3 {
		t.Errorf("gitQuote allocates %.0f times a call, want at most 3", n)
	}
}
