package config

import (
	"strings"
	"testing"
)

// A mistyped key is named and corrected.
func TestMistypedKeyIsCorrected(t *testing.T) {
	for typo, want := range map[string]string{
		"sesions:\n  idle_timeout: 1h\n":     `did you mean "sessions"`,
		"sessions:\n  idle_timout: 1h\n":     `did you mean "idle_timeout"`,
		"sessions:\n  max_runing: 2\n":       `did you mean "max_running"`,
		"adviser:\n  api_key_envv: X\n":      `did you mean "api_key_env"`,
		"completely_unrelated_thing: true\n": "unknown key",
	} {
		var c Config
		err := Parse(&c, []byte(typo))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", typo, err, want)
		}
	}
}
