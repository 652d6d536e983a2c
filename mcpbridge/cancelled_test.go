package mcpbridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// After notifications/cancelled the server sends no response to that
// request (MCP), while the command is cancelled with a receipt. A raw
// stdio client, since SDK clients drop a late response silently.
func TestNoResponseAfterCancelled(t *testing.T) {
	d := startDaemon(t)
	log := &syncBuf{}
	cmd := bridgeCmd(t, d, log)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	var seen []map[string]any // every message, in order
	send := func(s string) {
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// await reads until the response to id, keeping everything seen.
	await := func(id int) map[string]any {
		t.Helper()
		timeout := time.After(2 * time.Minute)
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("termd-mcp closed stdout: %s", log.String())
				}
				seen = append(seen, m)
				if m["id"] == float64(id) {
					return m
				}
			case <-timeout:
				t.Fatalf("no response to %d: %s", id, log.String())
			}
		}
	}
	result := func(m map[string]any) map[string]any {
		r, _ := m["result"].(map[string]any)
		sc, _ := r["structuredContent"].(map[string]any)
		return sc
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	await(1)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"terminal_plan","arguments":{"argv":["sleep","60"]}}}`)
	plan := str(result(await(2)), "plan_id")
	if plan == "" {
		t.Fatalf("no plan: %v", seen[len(seen)-1])
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"terminal_execute","arguments":{"plan_id":"` + plan + `","wait_seconds":120}}}`)
	time.Sleep(1500 * time.Millisecond) // let it start (either way it must end cancelled)
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"test"}}`)
	waitCancelled(t, plan, func(id int, body string) map[string]any {
		send(body)
		return result(await(id))
	})
	// The handler has returned by now (it cancelled the command before the
	// receipt existed); one more round trip flushes anything it wrote.
	send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	await(99)
	for _, m := range seen {
		if m["id"] == float64(3) {
			data, _ := json.Marshal(m)
			t.Errorf("a response was sent to the cancelled request: %s", strings.TrimSpace(string(data)))
		}
	}
}

// The same over stateful streamable HTTP (2025-11-25): the call's POST
// stream ends without a response to the cancelled request, the command is
// cancelled with a receipt, and a client resuming the stream
// (Last-Event-ID) is not handed the response either. A raw HTTP client,
// since SDK clients drop a late response silently.
func TestNoResponseAfterCancelledOverHTTP(t *testing.T) {
	d := startDaemon(t)
	hb := startHTTPBridge(t, d)
	hdr := map[string]string{"Authorization": "Bearer " + hb.Token, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
	open := func(body string, extra map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", hb.URL, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		for k, v := range extra {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	events := readSSEEvents
	call := func(id int, body string) map[string]any {
		t.Helper()
		resp := open(body, nil)
		defer resp.Body.Close()
		for _, e := range events(resp.Body) {
			if e.data["id"] == float64(id) {
				r, _ := e.data["result"].(map[string]any)
				sc, _ := r["structuredContent"].(map[string]any)
				return sc
			}
		}
		t.Fatalf("no response to %d (status %d)", id, resp.StatusCode)
		return nil
	}
	init := open(initBody, nil)
	_, _ = io.Copy(io.Discard, init.Body) // the whole stream: the session stands once it is answered
	init.Body.Close()
	sid := init.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize gave no session id: %d", init.StatusCode)
	}
	hdr["Mcp-Session-Id"] = sid
	hdr["Mcp-Protocol-Version"] = "2025-11-25"
	ack := open(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	_, _ = io.Copy(io.Discard, ack.Body)
	ack.Body.Close()
	plan := str(call(2, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"terminal_plan","arguments":{"argv":["sleep","60"]}}}`), "plan_id")
	if plan == "" {
		t.Fatal("no plan")
	}
	exec := open(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"terminal_execute","arguments":{"plan_id":"`+plan+`","wait_seconds":120}}}`, nil)
	defer exec.Body.Close()
	stream := make(chan []sseEvent, 1)
	go func() { stream <- events(exec.Body) }()
	time.Sleep(1500 * time.Millisecond) // let it start (either way it must end cancelled)
	open(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"test"}}`, nil).Body.Close()
	waitCancelled(t, plan, call)
	// The handler has returned (it cancelled the command before the receipt
	// existed): the call's stream ends, without a response to 3.
	var got []sseEvent
	select {
	case got = <-stream:
	case <-time.After(time.Minute):
		t.Fatal("the cancelled call's stream did not end")
	}
	last := ""
	for _, e := range got {
		if e.id != "" {
			last = e.id
		}
		if e.data["id"] == float64(3) {
			data, _ := json.Marshal(e.data)
			t.Errorf("a response was sent to the cancelled request: %s", data)
		}
	}
	checkResumeReplaysNoResponse(t, hb, hdr, got, last)
}

// checkResumeReplaysNoResponse resumes the cancelled call's stream from its
// priming event (Last-Event-ID): it replays nothing for request 3.
func checkResumeReplaysNoResponse(t *testing.T, hb *httpBridge, hdr map[string]string, got []sseEvent, last string) {
	events := readSSEEvents
	// Resuming the stream from its priming event replays nothing for 3.
	if last == "" {
		t.Fatal("the call's stream had no event id to resume from")
	}
	req, _ := http.NewRequest("GET", hb.URL, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", got[0].id)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err == nil {
		for _, e := range events(resp.Body) {
			if e.data["id"] == float64(3) {
				data, _ := json.Marshal(e.data)
				t.Errorf("resuming the stream hands over a response to the cancelled request: %s", data)
			}
		}
		resp.Body.Close()
	}
}

// sseEvent is one event of an SSE stream: its id and JSON data.
type sseEvent struct {
	id   string
	data map[string]any
}

// readSSEEvents reads a whole SSE stream: each event's id and JSON data.
func readSSEEvents(r io.Reader) []sseEvent {
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.id != "" || cur.data != nil {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id:"):
			cur.id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			_ = json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "data:"))), &cur.data)
		}
	}
	return out
}

// waitCancelled polls terminal_status (call sends a request with that id
// and returns its structured result) until plan's command ended with a
// receipt, which must say cancelled.
func waitCancelled(t *testing.T, plan string, call func(id int, body string) map[string]any) {
	t.Helper()
	for id, deadline := 11, time.Now().Add(time.Minute); ; id++ {
		st := call(id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"terminal_status","arguments":{"plan_id":%q}}}`, id, plan))
		if st["done"] == true && str(st, "receipt_id") != "" {
			if str(st, "state") != "cancelled" {
				t.Errorf("the cancelled call's command ended %v", st)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep 60 not ended after its call was cancelled: %v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
