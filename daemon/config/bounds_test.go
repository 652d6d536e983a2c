package config

import "testing"

// The bounds shared between sections (a global bound at least the
// per-principal one, durations of at least a second) name the key, the value
// and the bound, word for word.
func TestBoundsNameTheKey(t *testing.T) {
	for yaml, want := range map[string]string{
		"sessions:\n  per_principal: 10\n  global: 9\n":   "sessions.global: 9 must be at least sessions.per_principal (10) and at most 100000",
		"sessions:\n  global: 100001\n":                   "sessions.global: 100001 must be at least sessions.per_principal (8) and at most 100000",
		"connections:\n  per_uid: 64\n  global: 63\n":     "connections.global: 63 must be at least connections.per_uid (64) and at most 1000000",
		"sessions:\n  idle_timeout: 500ms\n":              "sessions.idle_timeout: 500ms is too short (at least 1s)",
		"approvals:\n  ttl: 0s\n":                         "approvals.ttl: 0s is too short (at least 1s)",
		"approvals:\n  max_grant_ttl: 999ms\n":            "approvals.max_grant_ttl: 999ms is too short (at least 1s)",
		"approvals:\n  ttl: 0s\n  max_grant_ttl: 0s\n":    "approvals.ttl: 0s is too short (at least 1s)",
		"connections:\n  idle_timeout: 10ms\n":            "connections.idle_timeout: 10ms is too short (at least 1s)",
		"approvals:\n  workspace_grant_ttl: 721h\n":       "approvals.workspace_grant_ttl: 721h0m0s must be at least 1s and at most approvals.max_grant_ttl (720h0m0s)",
		"sessions:\n  idle_timeout: 1s\n  global: 64\n":   "",
		"sessions:\n  global: 100000\n":                   "",
		"connections:\n  idle_timeout: 1s\n  global: 4\n": "connections.global: 4 must be at least connections.per_uid (128) and at most 1000000",
	} {
		got := ""
		if err := parseAndValidate(t, yaml); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%q: err = %q, want %q", yaml, got, want)
		}
	}
}

// parseAndValidate reads yaml over the defaults, with a workspace, and
// validates it: the first problem a config file has.
func parseAndValidate(t *testing.T, yaml string) error {
	c := Default()
	c.Workspaces = []string{t.TempDir()}
	if err := Parse(c, []byte(yaml)); err != nil {
		return err
	}
	return c.Validate()
}
