package gateway

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// TestOpenAPIDocument lints the served document with Redocly's
// recommended rules (pinned in gateway/openapilint; redocly.yaml says which
// rule is off and why) and checks what a
// generated client needs: a title and version, the bearer scheme on every
// /v1 route, and the gateway's own routes.
func TestOpenAPIDocument(t *testing.T) {
	doc := openAPIDocument()
	var d struct {
		Info                struct{ Title, Version string }
		SecurityDefinitions map[string]map[string]any `json:"securityDefinitions"`
		Security            []map[string][]string
		Paths               map[string]map[string]map[string]any
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	if d.Info.Title != "termd REST API" || d.Info.Version == "" || strings.Contains(d.Info.Version, "not set") {
		t.Errorf("info: %+v", d.Info)
	}
	if d.SecurityDefinitions["bearer"]["name"] != "Authorization" || len(d.Security) != 1 {
		t.Errorf("the document should declare the bearer token for every route: %v %v", d.SecurityDefinitions, d.Security)
	}
	for _, p := range []string{"/v1/events", "/v1/sse-ticket", "/healthz", "/openapi.json", "/v1/plans/{plan_id}:approve"} {
		if d.Paths[p] == nil {
			t.Errorf("path %s is not in the document", p)
		}
	}
	for p := range d.Paths {
		for _, seg := range strings.Split(p, "{")[1:] {
			if name, _, _ := strings.Cut(seg, "}"); strings.ContainsAny(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				t.Errorf("path %s: parameter %s should be snake_case like the bodies", p, name)
			}
		}
	}

	_, file, _, _ := runtime.Caller(0)
	lintDir := filepath.Join(filepath.Dir(file), "openapilint")
	redocly := filepath.Join(lintDir, "node_modules", ".bin", "redocly")
	if _, err := os.Stat(redocly); err != nil {
		harness.Missing(t, "%s is missing: run scripts/ci-deps.sh (npm ci in gateway/openapilint)", redocly)
	}
	path := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(redocly, "lint", "--config", filepath.Join(lintDir, "redocly.yaml"), "--format", "stylish", path)
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	// Problems are "LINE:COL  warning|error  rule  message" lines.
	if err != nil || regexp.MustCompile(`(?m)^\s*\d+:\d+\s+(warning|error)\s`).Match(out) {
		t.Errorf("redocly lint (recommended): %v\n%s", err, out)
	}
}
