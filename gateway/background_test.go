package gateway_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Background work over REST and SSE: an execution started with :execute
// returns at once, GET /v1/executions lists it while it runs (with its
// command), and its end is visible on the session's event stream as
// EVENT_KIND_FINISHED followed by EVENT_KIND_RECEIPT_SIGNED.
func TestBackgroundExecutionListAndEnd(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.d.Workspace, "log.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sid := str(e.call("POST", "/v1/sessions", map[string]any{"label": "background"}), "session", "id")
	p := e.call("POST", "/v1/plans", map[string]any{"session_id": sid, "request": map[string]any{"argv": []string{"tail", "-f", "log.txt"}}})["plan"]
	if str(p, "state") != "PLAN_STATE_PLANNED" {
		t.Fatalf("tail -f: %v", p)
	}
	s := e.openSSE("/v1/events?session_id="+sid, e.Operator)
	for ev := s.next(t); ev.Comment != "stream open"; ev = s.next(t) {
	}
	x := e.call("POST", "/v1/plans/"+str(p, "id")+":execute", map[string]any{})["execution"]
	id := str(x, "id")
	if str(x, "state") != "EXECUTION_STATE_RUNNING" {
		t.Fatalf("execute should return the running execution at once: %v", x)
	}

	for _, path := range []string{"/v1/executions?states=EXECUTION_STATE_RUNNING&states=EXECUTION_STATE_PAUSED", "/v1/executions?session_id=" + sid} {
		got := e.callAs(e.Viewer, "GET", path, nil)
		list, _ := got["executions"].([]any)
		if len(list) != 1 || str(list[0], "execution", "id") != id || strings.Join(toStrings(dig(list[0], "argv")), " ") != "tail -f log.txt" {
			t.Fatalf("GET %s as a viewer: %s", path, mustJSON(got))
		}
	}
	code, body := status(t, e.do("GET", "/v1/executions?states=SLEEPING", e.Operator, nil))
	if code != 400 || !strings.Contains(body, "SLEEPING") {
		t.Errorf("a bad state: %d %s, want 400 naming it", code, body)
	}

	e.call("POST", "/v1/executions/"+id+":cancel", map[string]any{})
	var kinds []string
	for len(kinds) == 0 || kinds[len(kinds)-1] != "EVENT_KIND_RECEIPT_SIGNED" {
		ev := s.nextEvent(t)
		var m map[string]any
		_ = json.Unmarshal([]byte(ev.Data), &m)
		switch ev.Event {
		case "EVENT_KIND_FINISHED":
			if str(m, "execution", "id") != id || str(m, "execution", "state") != "EXECUTION_STATE_CANCELLED" || str(m, "execution", "receipt_id") == "" {
				t.Errorf("finished event: %s", ev.Data)
			}
		case "EVENT_KIND_RECEIPT_SIGNED":
			if str(m, "receipt", "execution_id") != id && str(m, "receipt", "plan_id") != str(p, "id") {
				t.Errorf("receipt event for another execution: %s", ev.Data)
			}
		}
		kinds = append(kinds, ev.Event)
	}
	if !strings.Contains(strings.Join(kinds, " "), "EVENT_KIND_FINISHED EVENT_KIND_RECEIPT_SIGNED") {
		t.Errorf("the stream should show the end, then the receipt: %v", kinds)
	}
	if got := e.call("GET", "/v1/executions?states=EXECUTION_STATE_RUNNING", nil); len(toList(got["executions"])) != 0 {
		t.Errorf("nothing runs after the cancel: %s", mustJSON(got))
	}
	if got := e.call("GET", "/v1/executions?states=EXECUTION_STATE_CANCELLED&limit=1", nil); len(toList(got["executions"])) != 1 {
		t.Errorf("the cancelled execution is listed by its state: %s", mustJSON(got))
	}
}

func toList(v any) []any { l, _ := v.([]any); return l }

func toStrings(v any) []string {
	var out []string
	for _, x := range toList(v) {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
