package mcpbridge_test

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func post(t *testing.T, url string, hdr map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestHTTPRefusesWhatItShould(t *testing.T) {
	d := startDaemon(t)
	hb := startHTTPBridge(t, d)
	auth := "Bearer " + hb.Token
	cases := []struct {
		name string
		hdr  map[string]string
		body string
		want int
	}{
		{"the right token is let in", map[string]string{"Authorization": auth}, initBody, http.StatusOK},
		{"no token", nil, initBody, http.StatusUnauthorized},
		{"a wrong token", map[string]string{"Authorization": "Bearer " + strings.Repeat("x", len(hb.Token))}, initBody, http.StatusUnauthorized},
		{"the token without Bearer", map[string]string{"Authorization": hb.Token}, initBody, http.StatusUnauthorized},
		{"a cross-origin browser request", map[string]string{"Authorization": auth, "Origin": "http://evil.example"}, initBody, http.StatusForbidden},
		{"a rebinding Host", map[string]string{"Authorization": auth, "Host": "evil.example:80"}, initBody, http.StatusForbidden},
		{"a page of this very listener (same loopback origin)", map[string]string{"Authorization": auth, "Origin": strings.TrimSuffix(hb.URL, "/")}, initBody, http.StatusOK},
		{"a rebinding page (same origin as its Host, not loopback)", map[string]string{"Authorization": auth, "Host": "evil.example:80", "Origin": "http://evil.example:80"}, initBody, http.StatusForbidden},
		{"another loopback port", map[string]string{"Authorization": auth, "Origin": "http://127.0.0.1:1"}, initBody, http.StatusForbidden},
		{"an oversized body", map[string]string{"Authorization": auth}, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 2<<20) + `"}}`, http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := post(t, hb.URL, c.hdr, c.body).StatusCode; got != c.want {
				t.Errorf("status %d, want %d", got, c.want)
			}
		})
	}

	// A real client with the wrong token cannot connect.
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: hb.URL, HTTPClient: &http.Client{Transport: bearer{"wrong-" + hb.Token, http.DefaultTransport}}, MaxRetries: -1}
	if cs, err := c.Connect(ctx, tr, nil); err == nil {
		cs.Close()
		t.Error("a client with a wrong token connected")
	}
}

func TestHTTPRefusesToStartUnsafely(t *testing.T) {
	d := startDaemon(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"without a token file", []string{"--http", "127.0.0.1:0"}, "--token-file"},
		{"with a weak token", []string{"--http", "127.0.0.1:0", "--token-file", writeToken(t, "password123password123password123password123")}, "too weak"},
		{"with a short token", []string{"--http", "127.0.0.1:0", "--token-file", writeToken(t, "Zm9vYmFy")}, "too weak"},
		{"on a non-loopback address without TLS", []string{"--http", "0.0.0.0:0", "--token-file", writeToken(t, testToken)}, "not a loopback"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stderr syncBuf
			cmd := bridgeCmd(t, d, &stderr, c.args...)
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
				t.Fatalf("started (err %v): %s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("stderr %q does not say %q", stderr.String(), c.want)
			}
		})
	}
}

// Closing stdin ends the stdio bridge cleanly; a command it started keeps
// running in the daemon.
func TestStdioExitsWhenStdinCloses(t *testing.T) {
	d := startDaemon(t)
	var stderr syncBuf
	cmd := bridgeCmd(t, d, &stderr)
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"sleep", "2"}}, false)
	ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id"), "wait_seconds": 1}, false)
	if str(ex, "state") != "running" {
		t.Fatalf("execute: %s", text(res))
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("termd-mcp did not exit cleanly on stdin EOF: %v\n%s", cmd.ProcessState, stderr.String())
	}
	// The daemon still finishes (and signs) the command.
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := d.Client.Executions.GetExecution(context.Background(), &termdv1.GetExecutionRequest{ExecutionId: str(ex, "execution_id")})
		if err != nil {
			t.Fatal(err)
		}
		if s := st.GetExecution().GetState().String(); s != "EXECUTION_STATE_RUNNING" {
			if s != "EXECUTION_STATE_SUCCEEDED" || st.GetExecution().GetReceiptId() == "" {
				t.Errorf("after the bridge left, the command ended %s", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never finished")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
