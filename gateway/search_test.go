package gateway_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/termd/termd/gateway"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// GET /v1/receipts:search answers with the daemon's visibility (an agent
// token sees none of the operator's receipts), says what is wrong with an
// empty phrase, and POST /v1/receipts:reindex is for operators.
func TestReceiptSearchREST(t *testing.T) {
	agent := gateway.NewTokenValue()
	// This test is about search, not the free-space floor: it runs on a
	// crowded disk too.
	e := newEnv(t, envOpts{daemon: harness.Options{Config: "storage:\n  min_free_bytes: 1\n"}, tune: func(o *gateway.Options) {
		o.Tokens = append(o.Tokens, gateway.Token{Name: "bot", Role: termdv1.Role_ROLE_AGENT, Value: agent})
	}})
	if out, errOut, code := e.d.Run("termctl", "run", "--", "echo", "gateway search probe: OK"); code != 0 {
		t.Fatalf("run: %d %s %s", code, out, errOut)
	}
	path := "/v1/receipts:search?" + url.Values{"query": {"search PROBE: ok"}}.Encode()
	hits, _ := e.call("GET", path, nil)["hits"].([]any)
	if len(hits) != 1 || !strings.Contains(str(hits[0], "snippet"), "gateway search probe: OK") || str(hits[0], "receipt", "id") == "" {
		t.Fatalf("operator's search: %v", hits)
	}
	if got, _ := e.callAs(agent, "GET", path, nil)["hits"].([]any); len(got) != 0 {
		t.Fatalf("an agent token found the operator's receipt: %v", got)
	}
	code, body := status(t, e.do("GET", "/v1/receipts:search?query=", e.Operator, nil))
	if code != 400 || !strings.Contains(body, "empty") {
		t.Fatalf("empty phrase: %d %s, want 400 naming the problem", code, body)
	}
	if code, body := status(t, e.do("POST", "/v1/receipts:reindex", e.Viewer, map[string]any{})); code != 403 {
		t.Fatalf("viewer reindex: %d %s, want 403", code, body)
	}
	if n := str(e.call("POST", "/v1/receipts:reindex", map[string]any{}), "indexed"); n != "1" {
		t.Fatalf("reindex indexed %q receipts, want 1", n)
	}
}
