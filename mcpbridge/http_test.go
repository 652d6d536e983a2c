package mcpbridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
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
		{"an old-protocol call without a session", map[string]string{"Authorization": auth}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.StatusBadRequest},
		{"a 2026-07-28 call needs no session", map[string]string{"Authorization": auth, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`, http.StatusOK},
		{"an oversized body", map[string]string{"Authorization": auth}, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 2<<20) + `"}}`, http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := post(t, hb.URL, c.hdr, c.body)
			if res.StatusCode != c.want {
				t.Errorf("status %d, want %d", res.StatusCode, c.want)
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

// A stateful (2025-11-25) client's POST streams open with a priming event,
// an id it can resume from with Last-Event-ID (the conformance suite's
// SHOULD; without it a dropped stream loses the call's result).
func TestStatefulStreamsArePrimed(t *testing.T) {
	d := startDaemon(t)
	hb := startHTTPBridge(t, d)
	hdr := map[string]string{"Authorization": "Bearer " + hb.Token, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
	send := func(body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", hb.URL, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body) // the whole stream: it ends with the response
		return resp, string(b)
	}
	res, _ := send(initBody)
	sid := res.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize gave no session id: %d", res.StatusCode)
	}
	hdr["Mcp-Session-Id"] = sid
	hdr["Mcp-Protocol-Version"] = "2025-11-25"
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	res, body := send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	first, _, _ := strings.Cut(body, "\n\n")
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(first, "id:") || strings.Contains(first, `"result"`) {
		t.Fatalf("the stream should open with a priming event (an id, no data yet), got %q", first)
	}
	if !strings.Contains(body, "terminal_plan") {
		t.Fatalf("the tools/list result should follow the priming event: %q", body)
	}
}

// A 401 points at the protected-resource metadata (as MCP's authorization
// spec has clients look for it), which says: a bearer token in the header,
// no OAuth authorization server.
func TestUnauthorizedPointsAtResourceMetadata(t *testing.T) {
	d := startDaemon(t)
	hb := startHTTPBridge(t, d)
	res := post(t, hb.URL, nil, initBody)
	h := res.Header.Get("WWW-Authenticate")
	m := regexp.MustCompile(`resource_metadata="([^"]+)"`).FindStringSubmatch(h)
	if res.StatusCode != http.StatusUnauthorized || m == nil {
		t.Fatalf("401 without a resource_metadata pointer: %d %q", res.StatusCode, h)
	}
	meta, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Body.Close()
	var doc struct {
		Resource    string   `json:"resource"`
		Methods     []string `json:"bearer_methods_supported"`
		AuthServers []string `json:"authorization_servers"`
		TokenHowTo  string   `json:"termd_token"`
	}
	if err := json.NewDecoder(meta.Body).Decode(&doc); err != nil || meta.StatusCode != 200 {
		t.Fatalf("GET %s without a token: %d %v", m[1], meta.StatusCode, err)
	}
	if !strings.HasPrefix(doc.Resource, "http://127.0.0.1:") || len(doc.Methods) != 1 || doc.Methods[0] != "header" || len(doc.AuthServers) != 0 || !strings.Contains(doc.TokenHowTo, "--token-file") {
		t.Errorf("metadata: %+v", doc)
	}
}

// The bridge writes nothing per request at its default level: the MCP SDK
// logs every HTTP request and session at Info, which the bridge lowers to
// Debug (seen with --verbose).
func TestHTTPLogsNothingPerRequest(t *testing.T) {
	d := startDaemon(t)
	hb := startHTTPBridge(t, d)
	before := hb.log.String()
	c := mcp.NewClient(&mcp.Implementation{Name: "quiet", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hb.URL, HTTPClient: &http.Client{Transport: bearer{hb.Token, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 3 {
		p, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"pwd"}}, false)
		if res.IsError {
			t.Fatalf("plan: %s", text(res))
		}
		if ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(p, "plan_id")}, false); res.IsError || str(ex, "receipt_id") == "" {
			t.Fatalf("execute: %s", text(res))
		}
	}
	if extra := strings.TrimPrefix(hb.log.String(), before); strings.TrimSpace(extra) != "" {
		t.Fatalf("the bridge logged per request at its default level:\n%s", extra)
	}
}
