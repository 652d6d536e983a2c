package mcpbridge_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An agent's dev server through MCP (issue 32): python3 -m http.server
// started in the background runs without approval on the agent's workspace
// loopback; terminal_port_forward makes it answer on the host until closed.
func TestPortForwardTool(t *testing.T) {
	d := startDaemon(t)
	cs := connect(t, d, transports[0], &clientRecorder{}, false)
	const port = 18451
	ex, res := call(t, cs, "terminal_run", map[string]any{"argv": []string{"python3", "-m", "http.server", "--bind", "127.0.0.1", "18451"}, "wait_seconds": 1}, false)
	if res.IsError || str(ex, "state") != "running" || str(ex, "execution_id") == "" {
		t.Fatalf("the dev server should run without approval and keep running: %s", text(res))
	}
	id := str(ex, "execution_id")
	defer call(t, cs, "terminal_cancel", map[string]any{"execution_id": id}, false)

	var fw map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for {
		fw, res = call(t, cs, "terminal_port_forward", map[string]any{"execution_id": id, "remote_port": port}, false)
		if res.IsError {
			t.Fatalf("terminal_port_forward: %s", text(res))
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(str(fw, "url"))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), "Directory listing") {
				t.Fatalf("GET %s: %d %.200s", str(fw, "url"), resp.StatusCode, body)
			}
			break
		}
		// The server may not listen yet: close this forward and try again.
		call(t, cs, "terminal_port_forward", map[string]any{"close": str(fw, "forward_id")}, false)
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never answered: %v", str(fw, "url"), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.HasPrefix(str(fw, "local_address"), "127.0.0.1:") || !strings.Contains(str(fw, "next_step"), "close") {
		t.Errorf("the forward: %s", text(res))
	}
	_, res = call(t, cs, "terminal_port_forward", map[string]any{"close": str(fw, "forward_id")}, false)
	if res.IsError {
		t.Fatalf("close: %s", text(res))
	}
	if c, err := net.DialTimeout("tcp", str(fw, "local_address"), time.Second); err == nil {
		c.Close()
		t.Errorf("%s accepts connections after the forward was closed", str(fw, "local_address"))
	}
}
