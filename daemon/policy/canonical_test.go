package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
)

// The request hash is the SHA-256 of exactly the canonical request Explain
// shows, and it changes with anything an approver approves.
func TestRequestHashCoversTheCanonicalRequest(t *testing.T) {
	ws := t.TempDir()
	p := Default()
	ctx := decision.Context{Workspaces: []string{ws}}
	req := decision.Request{Argv: []string{"ls", "-la"}, Cwd: ws}
	ex := p.Explain(req, ctx)
	sum := sha256.Sum256(ex.Request)
	if hex.EncodeToString(sum[:]) != ex.RequestHash {
		t.Fatalf("request_hash %s is not the sha256 of the canonical request %s", ex.RequestHash, ex.Request)
	}
	for _, field := range []string{`"resolved_path"`, `"binary_sha256"`, `"policy_version"`, `"limits"`, `"verdict"`} {
		if !bytesContain(ex.Request, field) {
			t.Fatalf("canonical request lacks %s: %s", field, ex.Request)
		}
	}
	// Another working directory (same argv) is another request.
	sub := filepath.Join(ws, "sub")
	os.Mkdir(sub, 0o755)
	if d := p.Decide(decision.Request{Argv: req.Argv, Cwd: sub}, ctx); d.RequestHash == ex.RequestHash {
		t.Fatal("a different cwd gave the same request hash")
	}
	// Another policy version is another request.
	other, err := Parse("other.yaml", []byte(strings.Replace(string(DefaultYAML()), "max_timeout: 1h", "max_timeout: 59m", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if other.Version() == p.Version() {
		t.Fatal("changing max_timeout did not change the policy version")
	}
	if d := other.Decide(req, ctx); d.RequestHash == ex.RequestHash {
		t.Fatal("a different policy version gave the same request hash")
	}
	if d := p.Decide(decision.Request{Argv: req.Argv, Cwd: ws, Timeout: 7e9}, ctx); d.RequestHash == ex.RequestHash {
		t.Fatal("a different timeout gave the same request hash")
	}
}

func bytesContain(b []byte, s string) bool { return len(s) > 0 && indexOf(string(b), s) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
