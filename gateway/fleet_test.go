package gateway_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// planOn asks host (through the gateway, as the operator) for a write in
// confirm mode: a plan awaiting approval.
func (e *env) planOn(hostName, file string) (id, hash string) {
	e.t.Helper()
	p := e.call("POST", "/v1/hosts/"+hostName+"/plans", map[string]any{"request": map[string]any{"argv": []string{"touch", file}, "mode": "MODE_CONFIRM"}})["plan"]
	if st := str(p, "state"); st != "PLAN_STATE_AWAITING_APPROVAL" {
		e.t.Fatalf("touch %s on %s: state %s, want awaiting approval", file, hostName, st)
	}
	return str(p, "id"), str(p, "decision", "request_hash")
}

// hostsByName is GET /v1/hosts keyed by name.
func (e *env) hostsByName() map[string]map[string]any {
	e.t.Helper()
	out := map[string]map[string]any{}
	for _, h := range e.call("GET", "/v1/hosts", nil)["hosts"].([]any) {
		out[str(h, "name")] = h.(map[string]any)
	}
	return out
}

// One gateway, three daemons: each host's routes under /v1/hosts/NAME/,
// one approval queue with every host's plans, approval carried to the
// owning host bound to the hash shown, and a stopped host listed as down
// while the others are served.
func TestFleetRoutesAndQueue(t *testing.T) {
	e := newEnv(t, envOpts{fleet: []string{"a", "b", "c"}})
	hs := e.hostsByName()
	if len(hs) != 3 {
		t.Fatalf("GET /v1/hosts: %v", hs)
	}
	for _, n := range []string{"a", "b", "c"} {
		if str(hs[n], "state") != "up" || str(hs[n], "address") != e.hosts[n].Socket || dig(hs[n], "default") != (n == "a") {
			t.Errorf("host %s: %v", n, hs[n])
		}
	}

	ids, hashes := map[string]string{}, map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		ids[n], hashes[n] = e.planOn(n, "from-"+n+".txt")
	}
	// The fleet queue holds every host's plan, each with its host.
	q := e.call("GET", "/v1/fleet/plans", nil)
	got := map[string]string{}
	for _, p := range q["plans"].([]any) {
		got[str(p, "id")] = str(p, "host")
	}
	for n, id := range ids {
		if got[id] != n {
			t.Errorf("plan %s of host %s: in the queue as host %q (queue %v)", id, n, got[id], got)
		}
	}
	// Filtered by host.
	q = e.call("GET", "/v1/fleet/plans?host=b", nil)
	if ps := q["plans"].([]any); len(ps) != 1 || str(ps[0], "id") != ids["b"] || len(q["hosts"].([]any)) != 1 {
		t.Errorf("?host=b: %v", q)
	}
	if code, body := status(t, e.do("GET", "/v1/fleet/plans?host=nope", e.Operator, nil)); code != 400 || !strings.Contains(body, `\"nope\" is not in this gateway's fleet`) {
		t.Errorf("?host=nope: %d %s", code, body)
	}
	if code, body := status(t, e.do("GET", "/v1/hosts/nope/status", e.Operator, nil)); code != 404 || !strings.Contains(body, "GET /v1/hosts lists them") {
		t.Errorf("unknown host: %d %s", code, body)
	}
	// Unprefixed routes are the default host's.
	if p := e.call("GET", "/v1/plans/"+ids["a"], nil); str(p, "plan", "id") != ids["a"] {
		t.Errorf("unprefixed GET of a's plan: %v", p)
	}
	if code, _ := status(t, e.do("GET", "/v1/plans/"+ids["b"], e.Operator, nil)); code != 404 {
		t.Errorf("unprefixed GET of b's plan: %d, want 404 (it is on b)", code)
	}

	// Approve b's plan on b: a wrong hash is refused, the hash shown is
	// taken; it runs on b only, and b's receipt names the person.
	if code, body := status(t, e.do("POST", "/v1/hosts/b/plans/"+ids["b"]+":approve", e.Operator, map[string]any{"request_hash": hashes["a"]})); code < 400 {
		t.Errorf("approve b's plan with a's hash: %d %s", code, body)
	}
	if code, _ := status(t, e.do("POST", "/v1/hosts/b/plans/"+ids["b"]+":approve", e.Viewer, map[string]any{"request_hash": hashes["b"]})); code != 403 {
		t.Errorf("viewer approve on b: %d, want 403", code)
	}
	p := e.call("POST", "/v1/hosts/b/plans/"+ids["b"]+":approve", map[string]any{"request_hash": hashes["b"]})["plan"]
	if str(p, "state") != "PLAN_STATE_APPROVED" || str(p, "approval", "approver", "name") != "token:alice" || str(p, "approval", "approver", "via") != "gateway" {
		t.Fatalf("approve on b: %v", p)
	}
	x := e.call("POST", "/v1/hosts/b/plans/"+ids["b"]+":execute", map[string]any{})["execution"]
	rid := ""
	for deadline := time.Now().Add(60 * time.Second); rid == ""; time.Sleep(50 * time.Millisecond) {
		x = e.call("GET", "/v1/hosts/b/executions/"+str(x, "id"), nil)["execution"]
		rid = str(x, "receipt_id")
		if time.Now().After(deadline) {
			t.Fatalf("execution on b did not finish: %v", x)
		}
	}
	if str(x, "state") != "EXECUTION_STATE_SUCCEEDED" {
		t.Fatalf("execution on b: %v", x)
	}
	if _, err := os.Stat(filepath.Join(e.hosts["b"].Workspace, "from-b.txt")); err != nil {
		t.Errorf("b's file: %v", err)
	}
	for _, n := range []string{"a", "c"} {
		if _, err := os.Stat(filepath.Join(e.hosts[n].Workspace, "from-b.txt")); err == nil {
			t.Errorf("b's plan ran on %s", n)
		}
	}
	rj := str(e.call("GET", "/v1/hosts/b/receipts/"+rid, nil), "receipt_json")
	var rc struct {
		Approver struct{ Kind, Name string }
	}
	if err := json.Unmarshal([]byte(rj), &rc); err != nil || rc.Approver.Name != "token:alice via gateway" || !strings.Contains(rj, hashes["b"]) {
		t.Errorf("b's receipt: approver %+v (%v), want token:alice via gateway (the person, through the gateway) and the hash shown: %.300s", rc.Approver, err, rj)
	}
	if code, _ := status(t, e.do("GET", "/v1/hosts/a/receipts/"+rid, e.Operator, nil)); code != 404 {
		t.Errorf("b's receipt on a: %d, want 404", code)
	}

	// c stops: listed as down with its error; the queue still answers with
	// a's plan and says c did not; a and b are served.
	e.hosts["c"].Stop()
	hs = e.hostsByName()
	if str(hs["c"], "state") != "down" || str(hs["c"], "error") == "" || str(hs["a"], "state") != "up" || str(hs["b"], "state") != "up" {
		t.Errorf("after c stopped: %v", hs)
	}
	q = e.call("GET", "/v1/fleet/plans", nil)
	if ps := q["plans"].([]any); len(ps) != 1 || str(ps[0], "id") != ids["a"] {
		t.Errorf("queue with c down: %v", q["plans"])
	}
	for _, h := range q["hosts"].([]any) {
		if down := str(h, "name") == "c"; down != (str(h, "error") != "") || down != (str(h, "state") == "down") {
			t.Errorf("queue's host %v", h)
		}
	}
	if code, body := status(t, e.do("GET", "/v1/hosts/c/status", e.Operator, nil)); code != 503 {
		t.Errorf("c's status while c is down: %d %s, want 503", code, body)
	}
	if st := e.call("GET", "/v1/hosts/b/status", nil); str(st, "caller", "name") != "token:alice" {
		t.Errorf("b's status while c is down: %v", st)
	}
}
