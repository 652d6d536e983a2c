package mcpbridge_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
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
	id := 10
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		id++
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"terminal_status","arguments":{"plan_id":%q}}}`, id, plan))
		st := result(await(id))
		if st["done"] == true && str(st, "receipt_id") != "" {
			if str(st, "state") != "cancelled" {
				t.Errorf("the cancelled call's command ended %v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep 60 not ended after its call was cancelled: %v", st)
		}
	}
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
