package gateway_test

import (
	"strings"
	"testing"
)

// POST /v1/policy:lint checks a policy text as termd would load it and
// installs nothing; a viewer may ask, a bad policy is an answer naming the
// file and line, not an error.
func TestPolicyLintOverREST(t *testing.T) {
	e := newEnv(t)
	bad := e.callAs(e.Viewer, "POST", "/v1/policy:lint", map[string]any{"name": "team.yaml", "text": "version: 1\nno_such_key: 1\n"})
	if bad["valid"] == true || !strings.HasPrefix(str(bad, "problem"), "team.yaml:2: ") || bad["line"] != float64(2) {
		t.Fatalf("lint of a bad policy: %v", bad)
	}
	const small = "version: 1\ntrusted_path: [/usr/bin, /bin]\nlimits: {default_timeout: 1m, max_timeout: 1h, output_bytes: 65536, output_budget: 1048576, memory_bytes: 1073741824, pids: 64, grace: 1s}\n"
	before := e.call("GET", "/v1/policy", nil)
	good := e.callAs(e.Viewer, "POST", "/v1/policy:lint", map[string]any{"name": "team.yaml", "text": small})
	if good["valid"] != true || str(good, "problem") != "" {
		t.Fatalf("lint of a small valid policy: %v", good)
	}
	if after := e.call("GET", "/v1/policy", nil); str(after, "version") != str(before, "version") {
		t.Fatalf("lint changed the active policy: %v -> %v", str(before, "version"), str(after, "version"))
	}
}
