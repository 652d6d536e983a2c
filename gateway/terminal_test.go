package gateway_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// linesOf reads a Screen's lines.
func linesOf(screen any) []string {
	var out []string
	for _, l := range toList(dig(screen, "lines")) {
		s, _ := l.(string)
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// A python3 REPL over REST and the terminal SSE route: approve, run, attach
// (the current screen comes first), type 1+1 with :send and wait, read 2
// from the answer's screen and from the stream's next screens; a viewer
// cannot type; Ctrl-D ends it and the stream says end.
func TestTerminalOverRESTAndSSE(t *testing.T) {
	e := newEnv(t)
	p := e.call("POST", "/v1/plans", map[string]any{"request": map[string]any{"argv": []string{"python3"}, "tty": map[string]any{"rows": 24, "cols": 80}}})["plan"]
	if str(p, "state") != "PLAN_STATE_AWAITING_APPROVAL" {
		t.Fatalf("a REPL should wait for approval: %s", mustJSON(p))
	}
	pid := str(p, "id")
	e.call("POST", "/v1/plans/"+pid+":approve", map[string]any{"request_hash": str(p, "decision", "request_hash")})
	x := e.call("POST", "/v1/plans/"+pid+":execute", map[string]any{})["execution"]
	id := str(x, "id")
	if dig(x, "tty") == nil {
		t.Fatalf("the execution should say it has a terminal: %s", mustJSON(x))
	}

	s := e.openSSE("/v1/executions/"+id+"/terminal/stream", e.Operator)
	first := s.nextEvent(t)
	if first.Event != "screen" {
		t.Fatalf("the first message should be the screen, got %s %s", first.Event, first.Data)
	}
	// Typed before the prompt appears, the line waits in the terminal until
	// python reads it.
	got := e.call("POST", "/v1/executions/"+id+":send", map[string]any{"inputs": []any{map[string]any{"line": "1+1"}}, "wait": map[string]any{"wait": true}})
	if str(got, "ready") != "READY_REASON_WAITING_FOR_INPUT" || !slices.Contains(linesOf(got["screen"]), "2") {
		t.Fatalf(":send 1+1 should answer with 2 on the screen, waiting for input: %s", mustJSON(got))
	}
	for {
		ev := s.nextEvent(t)
		if ev.Event != "screen" {
			continue
		}
		var sc map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &sc); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(linesOf(sc), "2") {
			if ev.ID == "" {
				t.Error("a screen event should carry the output offset as its id")
			}
			break
		}
	}
	scr := e.call("GET", "/v1/executions/"+id+"/screen", nil)
	if !slices.Contains(linesOf(scr["screen"]), "2") {
		t.Errorf("GET screen: %s", mustJSON(scr))
	}
	if code, body := status(t, e.do("POST", "/v1/executions/"+id+":send", e.Viewer, map[string]any{"inputs": []any{map[string]any{"line": "print('viewer')"}}})); code != 403 {
		t.Errorf("a viewer typing: %d %s, want 403", code, body)
	}

	e.call("POST", "/v1/executions/"+id+":send", map[string]any{"inputs": []any{map[string]any{"key": "TERMINAL_KEY_CTRL_D"}}})
	for ev := s.next(t); ev.Event != "end"; ev = s.next(t) {
	}

	// A command without a terminal has no terminal stream.
	q := e.call("POST", "/v1/plans", map[string]any{"request": map[string]any{"argv": []string{"true"}}})["plan"]
	y := e.call("POST", "/v1/plans/"+str(q, "id")+":execute", map[string]any{})["execution"]
	if code, body := status(t, e.do("GET", "/v1/executions/"+str(y, "id")+"/terminal/stream", e.Operator, nil)); code < 400 || code >= 500 {
		t.Errorf("terminal stream of a plain execution: %d %s, want a 4xx saying why", code, body)
	}
}
