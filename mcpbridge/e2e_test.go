package mcpbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The bridge runs as uid 65534, an agent in this config; the test (root) is
// the operator who approves.
const agentConfig = "socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534]\n"

const consoleURL = "http://127.0.0.1:8765"

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runs the bridge as another uid (an agent principal): needs root")
	}
}

func startDaemon(t testing.TB) *harness.Daemon {
	needRoot(t)
	// touch is the tests' command that needs approval (sandboxed_workspace_writes: ask).
	return harness.Start(t, harness.Options{Config: agentConfig, AskWrites: true, Args: []string{"--console-url", consoleURL}})
}

// bridgeCmd is termd-mcp run as the agent principal.
func bridgeCmd(t testing.TB, d *harness.Daemon, stderr io.Writer, args ...string) *exec.Cmd {
	cmd := exec.Command(harness.Bin(t, "termd-mcp"), args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TERMD_SOCKET=" + d.Socket}
	if v := os.Getenv("GOCOVERDIR"); v != "" {
		cmd.Env = append(cmd.Env, "GOCOVERDIR="+v)
	}
	cmd.Dir = d.Workspace
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: harness.Nobody}
	cmd.Stderr = stderr
	return cmd
}

// syncBuf is a goroutine-safe buffer for a child's stderr.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// httpBridge is a running `termd-mcp --http`.
type httpBridge struct {
	URL   string
	Token string
	cmd   *exec.Cmd
	log   *syncBuf
	pprof string // TERMD_DEBUG_PPROF of the bridge, when set
}

func writeToken(t testing.TB, token string) string {
	dir, err := os.MkdirTemp("", "termd-mcp-token-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(p, int(harness.Nobody.Uid), int(harness.Nobody.Gid))
	return p
}

const testToken = "c2VjcmV0LXRlc3QtdG9rZW4tb2YtdGhpcnR5LXR3by1yYW5kb20tYnl0ZXMtZm9yLXRlcm1kLW1jcA"

func startHTTPBridge(t testing.TB, d *harness.Daemon, extra ...string) *httpBridge {
	t.Helper()
	return startHTTPBridgeProfiled(t, d, "", extra...)
}

// startHTTPBridgeProfiled is startHTTPBridge with the bridge's profiler on
// pprofAddr ("" = off).
func startHTTPBridgeProfiled(t testing.TB, d *harness.Daemon, pprofAddr string, extra ...string) *httpBridge {
	t.Helper()
	return startHTTPBridgeBin(t, d, "", pprofAddr, extra...)
}

// startHTTPBridgeBin is startHTTPBridgeProfiled running the termd-mcp
// binary bin ("" = the one built from this tree).
func startHTTPBridgeBin(t testing.TB, d *harness.Daemon, bin, pprofAddr string, extra ...string) *httpBridge {
	t.Helper()
	b := &httpBridge{Token: testToken, log: &syncBuf{}, pprof: pprofAddr}
	args := append([]string{"--http", "127.0.0.1:0", "--token-file", writeToken(t, b.Token)}, extra...)
	b.cmd = bridgeCmd(t, d, b.log, args...)
	if bin != "" {
		b.cmd.Path, b.cmd.Args[0] = bin, bin
	}
	if pprofAddr != "" {
		b.cmd.Env = append(b.cmd.Env, "TERMD_DEBUG_PPROF="+pprofAddr, profileRate)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("termd-mcp log:\n%s", b.log.String())
		}
	})
	re := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/)`)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(b.log.String()); m != nil {
			b.URL = m[1]
			return b
		}
		select {
		case <-exited:
			t.Fatalf("termd-mcp --http exited: %s", b.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("termd-mcp --http did not report its address: %s", b.log.String())
	return nil
}

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// clientRecorder collects what the server sends the client.
type clientRecorder struct {
	mu        sync.Mutex
	progress  []string
	elicitURL []string
}

func (r *clientRecorder) options(elicit bool) *mcp.ClientOptions {
	o := &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			r.mu.Lock()
			r.progress = append(r.progress, req.Params.Message)
			r.mu.Unlock()
		},
	}
	if elicit {
		o.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
		o.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			r.mu.Lock()
			r.elicitURL = append(r.elicitURL, req.Params.URL)
			r.mu.Unlock()
			return &mcp.ElicitResult{Action: "accept"}, nil
		}
	}
	return o
}

func (r *clientRecorder) progressText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.progress, "")
}

func (r *clientRecorder) elicited() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.elicitURL...)
}

// transports: each connects a go-sdk client to a fresh bridge.
type transport struct {
	name     string
	version  string // protocol version asked for (and expected)
	http     bool
	protocol string
}

var transports = []transport{
	{name: "stdio/2026-07-28", version: "2026-07-28"},
	{name: "stdio/2025-11-25", version: "2025-11-25"},
	{name: "http/2026-07-28", version: "2026-07-28", http: true},
	{name: "http/2025-11-25", version: "2025-11-25", http: true},
}

func connect(t *testing.T, d *harness.Daemon, tr transport, rec *clientRecorder, elicit bool) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "termd-e2e", Version: "1"}, rec.options(elicit))
	var t0 mcp.Transport
	if tr.http {
		hb := startHTTPBridge(t, d)
		t0 = &mcp.StreamableClientTransport{Endpoint: hb.URL, HTTPClient: &http.Client{Transport: bearer{hb.Token, http.DefaultTransport}}}
	} else {
		log := &syncBuf{}
		cmd := bridgeCmd(t, d, log)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("termd-mcp stderr:\n%s", log.String())
			}
		})
		t0 = &mcp.CommandTransport{Command: cmd}
	}
	cs, err := c.Connect(ctx, t0, &mcp.ClientSessionOptions{ProtocolVersion: tr.version})
	if err != nil {
		t.Fatalf("connect %s: %v", tr.name, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != tr.version {
		t.Fatalf("negotiated protocol %s, want %s", got, tr.version)
	}
	return cs
}

// call calls a tool and decodes its structured content.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, progress bool) (map[string]any, *mcp.CallToolResult) {
	t.Helper()
	return callWithin(t, cs, name, args, progress, 2*time.Minute)
}

// callWithin is call with the client giving up after limit.
func callWithin(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, progress bool, limit time.Duration) (map[string]any, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progress {
		p.SetProgressToken("tok-" + name)
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	out := map[string]any{}
	if res.StructuredContent != nil {
		data, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(data, &out)
	}
	return out, res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func TestBridgeOverTransports(t *testing.T) {
	d := startDaemon(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			rec := &clientRecorder{}
			cs := connect(t, d, tr, rec, false)
			ctx := context.Background()

			checkToolsList(t, ctx, cs)

			// An allowed command: plan, execute, receipt, with output as progress.
			plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"echo", "hello from " + tr.name}}, false)
			if res.IsError || str(plan, "state") != "planned" {
				t.Fatalf("plan echo: %s", text(res))
			}
			if dec, _ := plan["decision"].(map[string]any); !strings.HasPrefix(str(dec, "sandbox"), "read-only, workspace loopback") {
				t.Errorf("the plan does not say how the kernel confines it: %v", dec["sandbox"])
			}
			ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id"), "detail": true}, true)
			if res.IsError || str(ex, "state") != "succeeded" || ex["done"] != true {
				t.Fatalf("execute echo: %s", text(res))
			}
			if !strings.Contains(str(ex, "stdout"), "hello from "+tr.name) {
				t.Errorf("stdout = %q", str(ex, "stdout"))
			}
			receipt, _ := ex["receipt"].(map[string]any)
			if receipt == nil || str(ex, "receipt_id") == "" {
				t.Fatalf("no receipt in %s", text(res))
			}
			// With detail the result carries the receipt in its share form
			// (signed, no stdout, so the output is there once), which still
			// verifies.
			if strings.Contains(str(receipt, "stdout"), "hello from") || receipt["sharing_redacted"] != true {
				t.Errorf("the execute result's receipt should be the share form without output: %v", receipt)
			}
			verifyReceiptOffline(t, d, receipt)
			if !strings.Contains(rec.progressText(), "hello from "+tr.name) {
				t.Errorf("output did not arrive as progress notifications: %q", rec.progressText())
			}

			// The latest receipt of this client's session is that one.
			r, res := call(t, cs, "terminal_receipt", map[string]any{}, false)
			if res.IsError || str(r, "receipt_id") != str(ex, "receipt_id") || str(r, "status") == "" {
				t.Errorf("latest receipt: %s", text(res))
			}
			full, res := call(t, cs, "terminal_receipt", map[string]any{"receipt_id": str(ex, "receipt_id"), "include_output": true}, false)
			if fr, _ := full["receipt"].(map[string]any); res.IsError || !strings.Contains(str(fr, "stdout"), "hello from "+tr.name) {
				t.Errorf("terminal_receipt include_output: %s", text(res))
			}

			checkDeniedCommands(t, cs)

			// A long command is handed back running, and finished by polling.
			plan, res = call(t, cs, "terminal_plan", map[string]any{"argv": []string{"sleep", "3"}}, false)
			if res.IsError {
				t.Fatalf("plan sleep: %s", text(res))
			}
			ex, res = call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id"), "wait_seconds": 1}, false)
			if res.IsError || str(ex, "state") != "running" || ex["done"] != false || str(ex, "execution_id") == "" {
				t.Fatalf("execute sleep 3 with wait 1: %s", text(res))
			}
			if !strings.Contains(str(ex, "next_step"), "terminal_status") {
				t.Errorf("running result does not say how to poll: %s", str(ex, "next_step"))
			}
			id := str(ex, "execution_id")
			deadline := time.Now().Add(time.Minute)
			for {
				st, res := call(t, cs, "terminal_status", map[string]any{"execution_id": id}, false)
				if res.IsError {
					t.Fatalf("status: %s", text(res))
				}
				if st["done"] == true {
					if str(st, "state") != "succeeded" || st["receipt"] == nil {
						t.Errorf("sleep finished as %s", text(res))
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("sleep 3 never finished: %s", text(res))
				}
				time.Sleep(300 * time.Millisecond)
			}
			out, res := call(t, cs, "terminal_output", map[string]any{"execution_id": id}, false)
			if res.IsError || out["eof"] != true || out["more"] != false {
				t.Errorf("output of finished sleep: %s", text(res))
			}
		})
	}
}

// checkToolsList checks tools/list offers the plan/execute flow with its
// schemas and annotations, and no approval, and the instructions name it.
func checkToolsList(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
	// Tools: the flow is there, and approval is not.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = tool
		if strings.Contains(tool.Name, "approve") {
			t.Errorf("an agent is offered %q", tool.Name)
		}
	}
	for _, want := range []string{"terminal_run", "terminal_plan", "terminal_execute", "terminal_status", "terminal_output", "terminal_list", "terminal_pause", "terminal_resume", "terminal_cancel", "terminal_retry", "terminal_receipt", "terminal_policy_check", "terminal_advise"} {
		if names[want] == nil {
			t.Errorf("tool %s missing", want)
		}
	}
	// Output schemas were two thirds of tools/list: only
	// terminal_run's is listed (results carry structuredContent).
	if names["terminal_run"].OutputSchema == nil {
		t.Errorf("terminal_run has no output schema")
	}
	if a := names["terminal_status"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("terminal_status is not read-only: %+v", a)
	}
	// argv is a plain array of strings: UI clients (the Inspector)
	// cannot send an array into ["null","array"].
	for _, tool := range []string{"terminal_plan", "terminal_policy_check"} {
		raw, _ := json.Marshal(names[tool].InputSchema)
		var in struct {
			Properties map[string]struct {
				Type  any `json:"type"`
				Items struct {
					Type any `json:"type"`
				} `json:"items"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(raw, &in)
		if p := in.Properties["argv"]; p.Type != "array" || p.Items.Type != "string" {
			t.Errorf("%s: argv should be {type: array, items: string}, got %s", tool, raw)
		}
		if tool == "terminal_plan" && in.Properties["env"].Type != "object" {
			t.Errorf("terminal_plan: env should be an object, got %s", raw)
		}
	}
	if a := names["terminal_execute"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("terminal_execute is not marked destructive: %+v", a)
	}
	if ins := cs.InitializeResult().Instructions; !strings.Contains(ins, "terminal_plan") || !strings.Contains(ins, "terminal_execute") {
		t.Errorf("instructions do not name the flow: %q", ins)
	}
}

// checkDeniedCommands checks denied commands come back blocked, as an error
// result with their reasons and a next step, and so does a policy check.
func checkDeniedCommands(t *testing.T, cs *mcp.ClientSession) {
	// Denied commands come back with their reasons.
	for _, denied := range []map[string]any{
		{"argv": []string{"sudo", "ls"}},
		{"command": `bash -c "echo hi"`},
	} {
		p, res := call(t, cs, "terminal_plan", denied, false)
		if !res.IsError || str(p, "state") != "blocked" {
			t.Errorf("plan %v: want blocked isError result, got %s", denied, text(res))
		}
		dec, _ := p["decision"].(map[string]any)
		if reasons, _ := dec["reasons"].([]any); len(reasons) == 0 || str(dec, "verdict") != "deny" {
			t.Errorf("plan %v: no deny reasons: %s", denied, text(res))
		}
		if str(p, "next_step") == "" {
			t.Errorf("plan %v: no next step", denied)
		}
	}
	chk, res := call(t, cs, "terminal_policy_check", map[string]any{"argv": []string{"sudo", "ls"}}, false)
	if dec, _ := chk["decision"].(map[string]any); res.IsError || str(dec, "verdict") != "deny" {
		t.Errorf("policy check sudo: %s", text(res))
	}
}

// A write in confirm mode waits for an operator: the agent is told how to
// get it approved (and, when its client supports URL elicitation, the person
// is pointed at the console page); it runs only after termctl's approval.
func TestApprovalComesFromTheOperator(t *testing.T) {
	d := startDaemon(t)
	// Commands run as the requesting agent (uid 65534): let it write here.
	if err := os.Chown(d.Workspace, int(harness.Nobody.Uid), int(harness.Nobody.Gid)); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []transport{transports[0], transports[3]} {
		t.Run(tr.name, func(t *testing.T) {
			rec := &clientRecorder{}
			cs := connect(t, d, tr, rec, true)
			file := "approved-" + strings.ReplaceAll(tr.name, "/", "-")
			plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"touch", file}}, false)
			id := str(plan, "plan_id")
			if res.IsError || str(plan, "state") != "awaiting_approval" {
				t.Fatalf("plan touch: %s", text(res))
			}
			// The daemon is on a test socket: the command the user is given
			// must reach it as written.
			wantCmd := "termctl --socket " + d.Socket + " approve " + id
			if str(plan, "approve_command") != wantCmd || !strings.Contains(str(plan, "next_step"), wantCmd) {
				t.Errorf("result does not name `%s`: %s", wantCmd, text(res))
			}
			wantURL := consoleURL + "/plans/" + id
			if str(plan, "approval_url") != wantURL {
				t.Errorf("approval_url = %q, want %q", str(plan, "approval_url"), wantURL)
			}
			if got := rec.elicited(); len(got) != 1 || got[0] != wantURL {
				t.Errorf("URL elicitation = %v, want [%s]", got, wantURL)
			}

			// Executing before approval is refused, with the way forward.
			_, res = call(t, cs, "terminal_execute", map[string]any{"plan_id": id}, false)
			if !res.IsError || !strings.Contains(text(res), wantCmd) {
				t.Errorf("execute before approval: %s", text(res))
			}
			if _, err := os.Stat(filepath.Join(d.Workspace, file)); err == nil {
				t.Fatal("the file exists before approval")
			}

			// The operator approves with termctl; then it runs.
			if out, errOut, code := d.Run("termctl", "approve", id); code != 0 {
				// Fall back to the client library when termctl has no approve yet.
				t.Logf("termctl approve: %d %s %s; approving through the client library", code, out, errOut)
				ctx := context.Background()
				if _, err := d.Client.Plans.ApprovePlan(ctx, &termdv1.ApprovePlanRequest{PlanId: id}); err != nil {
					t.Fatalf("operator approve: %v", err)
				}
			}
			ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": id}, false)
			if res.IsError || str(ex, "state") != "succeeded" {
				t.Fatalf("execute after approval: %s", text(res))
			}
			if _, err := os.Stat(filepath.Join(d.Workspace, file)); err != nil {
				t.Errorf("approved touch did not create the file: %v", err)
			}
		})
	}
}

// Older protocol versions the SDK supports still work on both transports.
func TestOlderProtocolVersions(t *testing.T) {
	d := startDaemon(t)
	for _, v := range []string{"2025-06-18", "2025-03-26", "2024-11-05"} {
		for _, overHTTP := range []bool{false, true} {
			tr := transport{name: v, version: v, http: overHTTP}
			if overHTTP {
				tr.name = "http/" + v
			} else {
				tr.name = "stdio/" + v
			}
			t.Run(tr.name, func(t *testing.T) {
				cs := connect(t, d, tr, &clientRecorder{}, false)
				plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"true"}}, false)
				if res.IsError || str(plan, "state") != "planned" {
					t.Fatalf("plan true: %s", text(res))
				}
				ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id")}, false)
				if str(ex, "state") != "succeeded" {
					t.Errorf("execute true: %s", text(res))
				}
			})
		}
	}
}

// Output past the daemon's cap is not kept: once the command has ended, the
// agent reading at the end of what was kept is told it is the end (it was
// told "still running" forever).
func TestOutputPastTheCapEnds(t *testing.T) {
	d := startDaemon(t)
	if err := os.WriteFile(filepath.Join(d.Workspace, "big.txt"), bytes.Repeat([]byte("a"), 1100000), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, d, transports[0], &clientRecorder{}, false)
	plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"head", "-c", "1100000", "big.txt"}}, false)
	if res.IsError {
		t.Fatalf("plan: %s", text(res))
	}
	ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id"), "wait_seconds": 30}, false)
	if res.IsError || ex["done"] != true {
		t.Fatalf("execute: %s", text(res))
	}
	id := str(ex, "execution_id")
	st, _ := call(t, cs, "terminal_status", map[string]any{"execution_id": id}, false)
	kept, _ := st["stdout_bytes"].(float64)
	out, res := call(t, cs, "terminal_output", map[string]any{"execution_id": id, "offset": 1 << 20}, false)
	if res.IsError || out["eof"] != true || out["more"] != false || !strings.Contains(str(out, "next_step"), "end of what termd kept") {
		t.Fatalf("reading past the kept output of a finished command (%v bytes): %s", kept, text(res))
	}
}

// verifyReceiptOffline checks a receipt from a tool result with termctl and
// the daemon's public key only.
func verifyReceiptOffline(t *testing.T, d *harness.Daemon, receipt map[string]any) {
	t.Helper()
	dir := t.TempDir()
	data, err := json.Marshal(receipt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "r.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	key, errOut, code := d.Run("termctl", "receipts", "public-key")
	if code != 0 {
		t.Fatalf("public key: %s", errOut)
	}
	if err := os.WriteFile(filepath.Join(dir, "k.pub"), []byte(key), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := d.Run("termctl", "--socket", filepath.Join(dir, "none.sock"), "receipt", "verify", filepath.Join(dir, "r.json"), "--public-key", filepath.Join(dir, "k.pub")); code != 0 {
		t.Errorf("the receipt in the tool result does not verify offline: %s %s", out, errOut)
	}
}

// A bridge that exits (its MCP client closed stdin) closes the daemon
// sessions it opened that hold nothing pending; one with a plan awaiting
// approval stays, so the plan can still be approved and run from a new
// bridge. (Every bridge used to leave its session behind: a client restarted
// eight times hit the per-principal session cap.)
func TestBridgeExitClosesItsIdleSessions(t *testing.T) {
	d := startDaemon(t)
	open := func() map[string]bool {
		r, err := d.Client.Sessions.ListSessions(context.Background(), &termdv1.ListSessionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, s := range r.GetSessions() {
			m[s.GetId()] = !s.GetClosed()
		}
		return m
	}
	use := func(argv ...string) (session string, state string) {
		cs := connect(t, d, transports[1], &clientRecorder{}, false)
		p, res := call(t, cs, "terminal_plan", map[string]any{"argv": argv}, false)
		if res.IsError && str(p, "state") == "" {
			t.Fatalf("plan %v: %s", argv, text(res))
		}
		if str(p, "state") == "planned" {
			if _, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(p, "plan_id")}, false); res.IsError {
				t.Fatalf("execute: %s", text(res))
			}
		}
		cs.Close()
		return str(p, "session_id"), str(p, "state")
	}
	idle, _ := use("ls")
	pending, st := use("touch", "later.txt")
	if st != "awaiting_approval" {
		t.Fatalf("touch should wait for approval, got %s", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for open()[idle] && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	now := open()
	if now[idle] {
		t.Errorf("the session of an exited bridge that ran only ls is still open")
	}
	if !now[pending] {
		t.Errorf("the session holding a plan awaiting approval was closed; its approval would be lost")
	}
}

// A running command's counts match the output already returned, and a
// missing exit code is null in every result (execute, status, receipt).
func TestRunningCountsAndMissingExitCodes(t *testing.T) {
	d := startDaemon(t)
	if err := os.WriteFile(filepath.Join(d.Workspace, "log.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, d, transports[0], &clientRecorder{}, false)
	plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"tail", "-f", "log.txt"}}, false)
	if res.IsError || str(plan, "plan_id") == "" {
		t.Fatalf("plan tail -f: %s", text(res))
	}
	ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id"), "wait_seconds": 2}, false)
	if res.IsError || str(ex, "state") != "running" {
		t.Fatalf("tail -f should be running after 2 s: %s", text(res))
	}
	if v, present := ex["exit_code"]; !present || v != nil {
		t.Errorf("a running execution's exit_code should be null, got %v (present %v)", v, present)
	}
	// The text a model reads quotes the output once (the JSON after the
	// summary leaves it out; structuredContent has it).
	if n := strings.Count(text(res), "hello"); n != 1 {
		t.Errorf("the result's text should quote the output once, not %d times:\n%s", n, text(res))
	}
	if str(ex, "stdout") != "hello\n" || ex["stdout_bytes"] != float64(6) {
		t.Errorf("stdout_bytes should count the output already returned: stdout %q, stdout_bytes %v", str(ex, "stdout"), ex["stdout_bytes"])
	}
	id := str(ex, "execution_id")
	st, res := call(t, cs, "terminal_status", map[string]any{"execution_id": id}, false)
	if res.IsError || st["stdout_bytes"] != float64(6) {
		t.Errorf("terminal_status of a running execution should count its output: %s", text(res))
	}
	if _, res := call(t, cs, "terminal_cancel", map[string]any{"execution_id": id}, false); res.IsError {
		t.Fatalf("cancel: %s", text(res))
	}
	var receiptID string
	for deadline := time.Now().Add(30 * time.Second); receiptID == ""; time.Sleep(200 * time.Millisecond) {
		st, _ = call(t, cs, "terminal_status", map[string]any{"execution_id": id}, false)
		receiptID = str(st, "receipt_id")
		if time.Now().After(deadline) {
			t.Fatalf("no receipt after cancel: %v", st)
		}
	}
	if v, present := st["exit_code"]; !present || v != nil || str(st, "state") != "cancelled" {
		t.Errorf("a cancelled execution's exit_code should be null: %v", st)
	}
	rc, res := call(t, cs, "terminal_receipt", map[string]any{"receipt_id": receiptID}, false)
	if v, present := rc["exit_code"]; res.IsError || !present || v != nil || !strings.Contains(text(res), "no exit code") {
		t.Errorf("terminal_receipt should say null / no exit code for a cancelled command (not -1): %s", text(res))
	}
}

// Cancelling a terminal_execute call (the SDK sends notifications/cancelled,
// or closes a stateless request) cancels the command: it ends "cancelled"
// with a signed receipt instead of running to its timeout, and the agent
// finds it by plan_id.
func TestCancelledCallCancelsTheCommand(t *testing.T) {
	d := startDaemon(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			cs := connect(t, d, tr, &clientRecorder{}, false)
			plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"sleep", "60"}}, false)
			if res.IsError {
				t.Fatalf("plan: %s", text(res))
			}
			planID := str(plan, "plan_id")
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(1500*time.Millisecond, cancel)
			start := time.Now()
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "terminal_execute", Arguments: map[string]any{"plan_id": planID, "wait_seconds": 120}})
			if err == nil {
				t.Fatal("the cancelled call returned a result")
			}
			var st map[string]any
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				st, res = call(t, cs, "terminal_status", map[string]any{"plan_id": planID}, false)
				if res.IsError {
					t.Fatalf("terminal_status by plan_id: %s", text(res))
				}
				if st["done"] == true && str(st, "receipt_id") != "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("sleep 60 still not ended 30 s after its call was cancelled: %s", text(res))
				}
			}
			if str(st, "state") != "cancelled" || time.Since(start) > 45*time.Second {
				t.Errorf("the command should end cancelled soon after its call was: %v", st)
			}
			rc, res := call(t, cs, "terminal_receipt", map[string]any{"receipt_id": str(st, "receipt_id")}, false)
			if res.IsError || str(rc, "status") != "cancelled" {
				t.Errorf("the receipt should say cancelled: %s", text(res))
			}
		})
	}
}

// connectTo connects one more MCP client to a running HTTP bridge.
func connectTo(t *testing.T, hb *httpBridge, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "termd-e2e", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: hb.URL, HTTPClient: &http.Client{Transport: bearer{hb.Token, http.DefaultTransport}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Clients that start a process per call (the Inspector CLI), and many
// short-lived HTTP clients, all succeed: sessions do not pile up to the
// per-principal cap, and no client shares another's daemon session.
func TestShortLivedClientsGetTheirOwnSessions(t *testing.T) {
	d := startDaemon(t)
	openSessions := func() int {
		r, err := d.Client.Sessions.ListSessions(context.Background(), &termdv1.ListSessionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(r.GetSessions())
	}
	t.Run("a stdio process per call", func(t *testing.T) {
		for i := range 20 {
			cs := connect(t, d, transports[0], &clientRecorder{}, false)
			p, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"echo", fmt.Sprint(i)}}, false)
			cs.Close()
			if res.IsError {
				t.Fatalf("call %d: plan: %s", i, text(res))
			}
			cs = connect(t, d, transports[0], &clientRecorder{}, false)
			ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(p, "plan_id")}, false)
			cs.Close()
			if res.IsError || str(ex, "state") != "succeeded" {
				t.Fatalf("call %d: execute: %s", i, text(res))
			}
		}
		if n := openSessions(); n > 8 {
			t.Errorf("%d sessions open after 20 process-per-call clients", n)
		}
	})
	t.Run("http clients", func(t *testing.T) {
		hb := startHTTPBridge(t, d)
		if err := os.WriteFile(filepath.Join(d.Workspace, "follow.log"), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// A long-lived client keeps a command running throughout.
		a := connectTo(t, hb, "2025-11-25")
		pa, _ := call(t, a, "terminal_plan", map[string]any{"argv": []string{"tail", "-f", "follow.log"}}, false)
		if ex, res := call(t, a, "terminal_execute", map[string]any{"plan_id": str(pa, "plan_id"), "wait_seconds": 1}, false); str(ex, "state") != "running" {
			t.Fatalf("tail -f: %s", text(res))
		}
		for i := range 20 {
			b := connectTo(t, hb, "2025-11-25")
			p, res := call(t, b, "terminal_plan", map[string]any{"argv": []string{"echo", fmt.Sprint(i)}}, false)
			if res.IsError {
				t.Fatalf("client %d: plan: %s", i, text(res))
			}
			if str(p, "session_id") == str(pa, "session_id") {
				t.Fatalf("client %d was given the long-lived client's daemon session", i)
			}
			if ex, res := call(t, b, "terminal_execute", map[string]any{"plan_id": str(p, "plan_id")}, false); str(ex, "state") != "succeeded" {
				t.Fatalf("client %d: execute beside another client's running command: %s", i, text(res))
			}
			b.Close()
		}
		// The long-lived client's session and command are untouched.
		st, res := call(t, a, "terminal_status", map[string]any{"plan_id": str(pa, "plan_id")}, false)
		if str(st, "state") != "running" {
			t.Errorf("the long-lived client's command: %s", text(res))
		}
		again, _ := call(t, a, "terminal_plan", map[string]any{"argv": []string{"true"}}, false)
		if str(again, "session_id") != str(pa, "session_id") {
			t.Errorf("the long-lived client lost its session")
		}
		if _, res := call(t, a, "terminal_cancel", map[string]any{"plan_id": str(pa, "plan_id")}, false); res.IsError {
			t.Errorf("cancel by plan_id: %s", text(res))
		}
	})
}
