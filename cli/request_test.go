package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func TestRequestFlagsBuild(t *testing.T) {
	f := requestFlags{cwd: "/w", env: []string{"LANG=C", "TZ=UTC=x"}, timeout: 1500 * time.Millisecond, mode: "Trusted"}
	req, err := f.build([]string{"ls", "-la"})
	if err != nil {
		t.Fatal(err)
	}
	if req.TimeoutSeconds != 2 || req.Env["TZ"] != "UTC=x" || req.Cwd != "/w" || len(req.Argv) != 2 || req.Mode.String() != "MODE_TRUSTED" {
		t.Fatalf("unexpected request: %v", req)
	}
	// A request without a cwd gets the current directory.
	req, _ = (&requestFlags{command: "ls"}).build(nil)
	if req.Cwd == "" || req.Command != "ls" {
		t.Fatalf("cwd should default to the current directory: %v", req)
	}
	bad := []struct {
		f    requestFlags
		argv []string
	}{
		{requestFlags{}, nil},                                 // no command
		{requestFlags{command: "ls"}, []string{"ls"}},         // both forms
		{requestFlags{mode: "x"}, []string{"ls"}},             // unknown mode
		{requestFlags{env: []string{"=v"}}, []string{"ls"}},   // no name
		{requestFlags{timeout: -time.Second}, []string{"ls"}}, // negative
	}
	for _, b := range bad {
		if _, err := b.f.build(b.argv); err == nil {
			t.Errorf("%+v %q: want a usage error", b.f, b.argv)
		}
	}
}

func TestShellQuoteIsPasteable(t *testing.T) {
	cases := map[string][]string{
		"ls -la":                  {"ls", "-la"},
		"echo 'a b' ''":           {"echo", "a b", ""},
		`echo 'it'\''s'`:          {"echo", "it's"},
		"touch ./x.txt --opt=1,2": {"touch", "./x.txt", "--opt=1,2"},
		"echo '$HOME;rm'":         {"echo", "$HOME;rm"},
	}
	for want, argv := range cases {
		if got := cmdline.Quote(argv); got != want {
			t.Errorf("cmdline.Quote(%q) = %s, want %s", argv, got, want)
		}
	}
}

func TestSignalNumber(t *testing.T) {
	for name, want := range map[string]int{"SIGKILL": 9, "KILL": 9, "SIGTERM": 15, "killed": 0, "": 0} {
		if got := signalNumber(name); got != want {
			t.Errorf("signalNumber(%q) = %d, want %d", name, got, want)
		}
	}
}

// The --remember words termctl approve reads are the words grant listings
// print, scope for scope.
func TestGrantScopeWords(t *testing.T) {
	for _, word := range []string{"once", "request", "session-pattern", "workspace-request", "workspace-pattern"} {
		pattern := ""
		if strings.HasSuffix(word, "-pattern") {
			pattern = "git commit -m <any>"
		}
		spec, err := grantSpec(word, pattern, 0)
		if err != nil {
			t.Fatalf("--remember %s: %v", word, err)
		}
		scope := termdv1.GrantScope_GRANT_SCOPE_ONCE
		if spec != nil {
			scope = spec.Scope
		}
		if got := grantScopeWord(scope); got != word {
			t.Errorf("--remember %s makes scope %v, printed as %q", word, scope, got)
		}
	}
	if got := grantScopeWord(termdv1.GrantScope_GRANT_SCOPE_UNSPECIFIED); got != "once" {
		t.Errorf("an unspecified scope is printed as %q, want once", got)
	}
}
