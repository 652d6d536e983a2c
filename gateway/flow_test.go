package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/gateway"
	"github.com/termd/termd/internal/harness"
)

// waitFinished polls an execution until it has a receipt.
func (e *env) waitFinished(execID string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		x := e.call("GET", "/v1/executions/"+execID, nil)["execution"]
		st := str(x, "state")
		if st != "EXECUTION_STATE_RUNNING" && st != "EXECUTION_STATE_PAUSED" && str(x, "receipt_id") != "" {
			return x.(map[string]any)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("execution %s did not finish: %v", execID, x)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readAll reads an execution's stdout through the REST output route.
func (e *env) readAll(execID string) string {
	e.t.Helper()
	var out []byte
	off := 0
	for i := 0; i < 100; i++ {
		r := e.call("GET", "/v1/executions/"+execID+"/output?stream=OUTPUT_STREAM_STDOUT&offset="+strconv.Itoa(off), nil)
		b, err := base64.StdEncoding.DecodeString(str(r, "data"))
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, b...)
		n, _ := strconv.Atoi(str(r, "next_offset"))
		off = n
		if len(b) == 0 || dig(r, "eof") == true {
			break
		}
	}
	return string(out)
}

func TestPlanApproveExecuteReceipt(t *testing.T) {
	e := newEnv(t)
	plan := func(argv ...string) map[string]any {
		return e.call("POST", "/v1/plans", map[string]any{"request": map[string]any{"argv": argv, "mode": "MODE_CONFIRM"}})["plan"].(map[string]any)
	}

	// A write in confirm mode waits for a person.
	p := plan("touch", "hello.txt")
	if st := str(p, "state"); st != "PLAN_STATE_AWAITING_APPROVAL" {
		t.Fatalf("touch in confirm mode: state %s, want awaiting approval: %v", st, p)
	}
	id, hash := str(p, "id"), str(p, "decision", "request_hash")
	if hash == "" {
		t.Fatal("no request hash")
	}
	// It is in the approval queue.
	q := e.call("GET", "/v1/plans?states=PLAN_STATE_AWAITING_APPROVAL", nil)
	if !strings.Contains(mustJSON(q), id) {
		t.Errorf("plan %s not in the awaiting list", id)
	}
	// A viewer token cannot approve; a wrong hash is refused; nothing ran.
	if code, body := status(t, e.do("POST", "/v1/plans/"+id+":approve", e.Viewer, map[string]any{"request_hash": hash})); code != 403 {
		t.Errorf("viewer approve: %d %s, want 403", code, body)
	}
	if code, body := status(t, e.do("POST", "/v1/plans/"+id+":approve", e.Operator, map[string]any{"request_hash": strings.Repeat("0", 64)})); code < 400 {
		t.Errorf("approve with a wrong hash: %d %s, want a refusal", code, body)
	}
	if _, err := os.Stat(filepath.Join(e.d.Workspace, "hello.txt")); err == nil {
		t.Fatal("hello.txt exists before approval")
	}
	// Approve exactly what was shown, then run it.
	p = e.call("POST", "/v1/plans/"+id+":approve", map[string]any{"request_hash": hash})["plan"].(map[string]any)
	if st := str(p, "state"); st != "PLAN_STATE_APPROVED" {
		t.Fatalf("after approve: %s", st)
	}
	if who := str(p, "approval", "approver", "name"); who != "token:alice" {
		t.Errorf("approver %q, want token:alice", who)
	}
	x := e.call("POST", "/v1/plans/"+id+":execute", map[string]any{})["execution"]
	x = e.waitFinished(str(x, "id"))
	if st := str(x, "state"); st != "EXECUTION_STATE_SUCCEEDED" {
		t.Fatalf("touch: %s %v", st, x)
	}
	if _, err := os.Stat(filepath.Join(e.d.Workspace, "hello.txt")); err != nil {
		t.Errorf("hello.txt was not created: %v", err)
	}

	// The receipt verifies, names the approver, and exports for sharing.
	rid := str(x, "receipt_id")
	r := e.call("GET", "/v1/receipts/"+rid, nil)
	rj := str(r, "receipt_json")
	if !strings.Contains(rj, hash) || !strings.Contains(rj, "token:alice") {
		t.Errorf("receipt lacks the request hash or approver: %.400s", rj)
	}
	v := e.call("POST", "/v1/receipts:verify", map[string]any{"receipt_json": rj})
	if dig(v, "valid") != true {
		t.Errorf("receipt does not verify: %v", v)
	}
	tampered := strings.Replace(rj, "hello.txt", "hellO.txt", 1)
	if v := e.call("POST", "/v1/receipts:verify", map[string]any{"receipt_json": tampered}); dig(v, "valid") == true {
		t.Error("a tampered receipt verified")
	}
	ex := e.call("GET", "/v1/receipts/"+rid+":export?share=true", nil)
	if str(ex, "receipt_json") == "" {
		t.Error("share export is empty")
	}
	list := e.call("GET", "/v1/receipts", nil)
	if !strings.Contains(mustJSON(list), rid) {
		t.Error("receipt not listed")
	}

	// A read-only command runs without approval and its output is readable.
	p = plan("ls", "-1")
	if st := str(p, "state"); st != "PLAN_STATE_PLANNED" {
		t.Fatalf("ls: state %s, want planned: %v", st, p)
	}
	x = e.call("POST", "/v1/plans/"+str(p, "id")+":execute", map[string]any{})["execution"]
	x = e.waitFinished(str(x, "id"))
	if out := e.readAll(str(x, "id")); !strings.Contains(out, "hello.txt") {
		t.Errorf("ls output %q lacks hello.txt", out)
	}

	// A denied command is blocked with reasons and cannot run.
	p = plan("sudo", "ls")
	if st := str(p, "state"); st != "PLAN_STATE_BLOCKED" {
		t.Fatalf("sudo ls: state %s, want blocked", st)
	}
	if rs, _ := dig(p, "decision", "reasons").([]any); len(rs) == 0 {
		t.Error("blocked plan has no reasons")
	}
	if code, body := status(t, e.do("POST", "/v1/plans/"+str(p, "id")+":execute", e.Operator, map[string]any{})); code < 400 {
		t.Errorf("executing a blocked plan: %d %s", code, body)
	}

	// Deny with a reason.
	p = plan("touch", "denied.txt")
	p = e.call("POST", "/v1/plans/"+str(p, "id")+":deny", map[string]any{"reason": "not today"})["plan"].(map[string]any)
	if str(p, "state") != "PLAN_STATE_DENIED" || str(p, "denial", "reason") != "not today" {
		t.Errorf("deny: %v", p)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSSESessionIDsAndResume(t *testing.T) {
	e := newEnv(t, envOpts{tune: func(o *gateway.Options) { o.Heartbeat = 200 * time.Millisecond }})
	sid := str(e.call("POST", "/v1/sessions", map[string]any{"label": "sse"}), "session", "id")
	for _, argv := range [][]string{{"ls"}, {"touch", "a.txt"}, {"touch", "b.txt"}} {
		e.call("POST", "/v1/plans", map[string]any{"session_id": sid, "request": map[string]any{"argv": argv, "mode": "MODE_CONFIRM"}})
	}
	s := e.openSSE("/v1/events?history=1&session_id="+sid, e.Operator)
	var got []sseEvent
	var last uint64
	for len(got) < 4 {
		ev := s.nextEvent(t)
		n, err := strconv.ParseUint(ev.ID, 10, 64)
		if err != nil || n <= last {
			t.Fatalf("event id %q after %d: not an increasing sequence", ev.ID, last)
		}
		last = n
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			t.Fatalf("data is not JSON: %q", ev.Data)
		}
		if str(m, "seq") != ev.ID || str(m, "kind") != ev.Event || str(m, "session_id") != sid {
			t.Errorf("id/event lines disagree with the data: id=%s event=%s data=%s", ev.ID, ev.Event, ev.Data)
		}
		got = append(got, ev)
	}
	kinds := map[string]bool{}
	for _, ev := range got {
		kinds[ev.Event] = true
	}
	if !kinds["EVENT_KIND_PLAN_CREATED"] && !kinds["EVENT_KIND_AWAITING_APPROVAL"] {
		t.Errorf("no plan events among %v", kinds)
	}
	// A heartbeat comment keeps the idle stream alive.
	for {
		ev := s.next(t)
		if ev.Comment == "heartbeat" {
			break
		}
	}
	s.res.Body.Close()

	// Reconnect the way EventSource does: the events after Last-Event-ID follow.
	r := e.openSSE("/v1/events?session_id="+sid, e.Operator, "Last-Event-ID", got[1].ID)
	if ev := r.nextEvent(t); ev.ID != got[2].ID || ev.Data != got[2].Data {
		t.Errorf("resume after %s: got id %s, want %s", got[1].ID, ev.ID, got[2].ID)
	}
	r.res.Body.Close()
	// The since parameter does the same (a fresh ticket cannot carry a header).
	tk := str(e.call("POST", "/v1/sse-ticket", map[string]any{}), "ticket")
	r = e.openSSE("/v1/events?session_id="+sid+"&since="+got[2].ID+"&ticket="+tk, "")
	if ev := r.nextEvent(t); ev.ID != got[3].ID {
		t.Errorf("since=%s: got id %s, want %s", got[2].ID, ev.ID, got[3].ID)
	}
	r.res.Body.Close()

	// The all-sessions stream uses global sequence numbers.
	a := e.openSSE("/v1/events?history=1", e.Operator)
	ev := a.nextEvent(t)
	var m map[string]any
	_ = json.Unmarshal([]byte(ev.Data), &m)
	if str(m, "global_seq") != ev.ID {
		t.Errorf("all stream: id %s, globalSeq %s", ev.ID, str(m, "global_seq"))
	}
	a.res.Body.Close()

	// A new subscriber starts at now: no history, no lag notice; its first
	// event is the next one published.
	n := e.openSSE("/v1/events", e.Operator)
	for ev := n.next(t); ev.Comment == "" || ev.Comment == "heartbeat"; ev = n.next(t) {
		if ev.Comment == "stream open" {
			break
		}
	}
	e.call("POST", "/v1/plans", map[string]any{"session_id": sid, "request": map[string]any{"argv": []string{"touch", "now.txt"}, "mode": "MODE_CONFIRM"}})
	first := n.nextEvent(t)
	if first.Event != "EVENT_KIND_PLAN_CREATED" || !strings.Contains(first.Data, "now.txt") {
		t.Errorf("a new subscriber's first event should be the new plan, got %s %s", first.Event, first.Data)
	}
	n.res.Body.Close()

	// A viewer sees the stream too (read-only), but not by a bad session.
	code, body := status(t, e.do("GET", "/v1/events?session_id=nope", e.Operator, nil))
	if code != http.StatusNotFound || !strings.Contains(body, `"status":"NOT_FOUND"`) || !strings.Contains(body, "nope") {
		t.Errorf("an unknown session's stream should be a 404 naming it, not a 200 stream with an error: %d %s", code, body)
	}
}

func TestSSEDisconnectCancelsDaemonStream(t *testing.T) {
	// The daemon's own count of event subscribers (its Prometheus gauge) shows
	// whether the gateway's stream really ended on the daemon side.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	l.Close()
	e := newEnv(t, envOpts{daemon: harness.Options{Config: "metrics_listen: " + metricsAddr + "\n"}})
	subscribers := func() int {
		res, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return -1
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "termd_event_subscribers "); ok {
				n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return int(n)
			}
		}
		return -1
	}
	waitFor(t, "the daemon's metrics", func() bool { return subscribers() == 0 })
	for i := 0; i < 5; i++ {
		s := e.openSSE("/v1/events", e.Operator)
		s.next(t) // the stream is open
		waitFor(t, "one daemon subscriber", func() bool { return subscribers() == 1 && e.gw.ActiveStreams() == 1 })
		s.res.Body.Close() // the browser tab goes away
		waitFor(t, "the daemon subscriber to go away", func() bool { return subscribers() == 0 && e.gw.ActiveStreams() == 0 })
	}
	// The daemon still serves new streams normally.
	s := e.openSSE("/v1/events", e.Operator)
	e.call("POST", "/v1/plans", map[string]any{"request": map[string]any{"argv": []string{"ls"}}})
	if ev := s.nextEvent(t); ev.Event == "" {
		t.Error("no event after reconnecting")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
