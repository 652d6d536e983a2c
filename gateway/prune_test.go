package gateway_test

import (
	"testing"
	"time"
)

// Retention is reachable over REST, for operator tokens only.
func TestPruneReceiptsOverREST(t *testing.T) {
	e := newEnv(t)
	p := e.call("POST", "/v1/plans", map[string]any{"request": map[string]any{"argv": []string{"echo", "old"}}})["plan"].(map[string]any)
	x := e.call("POST", "/v1/plans/"+str(p, "id")+":execute", map[string]any{})["execution"]
	e.waitFinished(str(x, "id"))
	time.Sleep(10 * time.Millisecond)
	before := time.Now().UTC().Format(time.RFC3339Nano)
	if code, body := status(t, e.do("POST", "/v1/receipts:prune", e.Viewer, map[string]any{"before": before})); code != 403 {
		t.Fatalf("viewer prune: %d %s, want 403", code, body)
	}
	r := e.call("POST", "/v1/receipts:prune", map[string]any{"before": before})
	if str(r, "pruned") != "1" || str(r, "head_seq") != "1" || str(r, "checkpoint_json") == "" {
		t.Fatalf("prune over REST: %v", r)
	}
	if v := e.call("POST", "/v1/audit:verify", map[string]any{}); dig(v, "ok") != true || str(v, "pruned_through") != "1" {
		t.Fatalf("audit verify after prune: %v", v)
	}
}
