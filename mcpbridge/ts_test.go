package mcpbridge_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// TestTypeScriptClient drives the bridge with the official TypeScript SDK
// (mcpbridge/tsclient/client.mjs) over stdio and HTTP at both protocol eras.
func TestTypeScriptClient(t *testing.T) {
	needRoot(t)
	node, err := exec.LookPath("node")
	if err != nil {
		harness.Missing(t, "node is not installed: install Node.js 18 or later")
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		harness.Missing(t, "mcpbridge/tsclient/node_modules is missing: run scripts/ci-deps.sh (npm ci in mcpbridge/tsclient)")
	}
	d := startDaemon(t)
	if err := os.Chown(d.Workspace, int(harness.Nobody.Uid), int(harness.Nobody.Gid)); err != nil {
		t.Fatal(err)
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			steps := runTypeScriptClient(t, d, tr, node, dir)
			res := func(step string) map[string]any { m, _ := steps[step]["sc"].(map[string]any); return m }

			if v := str(steps["connect"], "version"); v != tr.version {
				t.Errorf("negotiated %q, want %s", v, tr.version)
			}
			names, _ := steps["tools"]["names"].([]any)
			var ns []string
			for _, n := range names {
				ns = append(ns, n.(string))
			}
			if !slices.Contains(ns, "terminal_plan") || !slices.Contains(ns, "terminal_execute") || slices.ContainsFunc(ns, func(s string) bool { return strings.Contains(s, "approve") }) {
				t.Errorf("tools = %v", ns)
			}
			if s := res("execute_pwd"); str(s, "state") != "succeeded" || !strings.Contains(str(s, "stdout"), d.Workspace) || str(s, "receipt_id") == "" {
				t.Errorf("pwd: %v", steps["execute_pwd"])
			}
			// terminal_run: one call, checked by the SDK against its output
			// schema; the execution and receipt come as resource links.
			if s := res("run_pwd"); steps["run_pwd"]["isError"] == true || str(s, "state") != "succeeded" || str(s, "stdout") != d.Workspace+"\n" || s["exit_code"] != float64(0) || str(s, "receipt_id") == "" {
				t.Errorf("terminal_run pwd: %v", steps["run_pwd"])
			} else if links, _ := steps["run_pwd"]["links"].([]any); !slices.Contains(links, any("receipt://"+str(s, "receipt_id"))) || !slices.Contains(links, any("execution://"+str(s, "execution_id"))) {
				t.Errorf("terminal_run pwd: resource links %v, want its execution and receipt", links)
			}
			if p, _ := steps["execute_pwd"]["progress"].([]any); len(p) == 0 {
				t.Errorf("no progress notifications for pwd: %v", steps["execute_pwd"])
			}
			if steps["plan_sudo"]["isError"] != true || str(res("plan_sudo"), "state") != "blocked" {
				t.Errorf("sudo ls: %v", steps["plan_sudo"])
			}
			if str(res("execute_sleep"), "state") != "running" || str(res("status_sleep"), "state") != "succeeded" {
				t.Errorf("sleep 3: %v then %v", steps["execute_sleep"], steps["status_sleep"])
			}
			if str(res("execute_touch"), "state") != "succeeded" {
				t.Errorf("approved touch: %v", steps["execute_touch"])
			}
			if c := steps["cancel"]; c["aborted"] != true || str(res("cancel"), "state") != "cancelled" {
				t.Errorf("an aborted terminal_execute should cancel its command: %v", c)
			}
			// Stateless 2026-07-28 HTTP requests carry no client identity:
			// they share the bridge's one stateless session (README).
			if s := steps["second_client"]; str(s, "first") == "" || (str(s, "first") == str(s, "second")) != (tr.http && tr.version >= "2026-07-28") {
				t.Errorf("two clients at once should have their own daemon sessions (but stateless HTTP requests share one): %v", s)
			}
			if term, _ := res("execute_repl")["terminal"].(map[string]any); str(term, "ready") != "waiting_for_input" || !strings.Contains(str(term, "screen"), ">>>") {
				t.Errorf("terminal_execute of python3 should answer with its prompt, waiting for input: %v", steps["execute_repl"])
			}
			if s := res("repl"); str(s, "ready") != "waiting_for_input" || !slices.Contains(strings.Split(str(s, "screen"), "\n"), "2") || !strings.Contains(str(s, "screen"), ">>>") {
				t.Errorf("terminal_send 1+1 should show 2 on the screen: %v", steps["repl"])
			}
			if str(res("repl_end"), "ready") != "exited" {
				t.Errorf("Ctrl-D should end the REPL: %v", steps["repl_end"])
			}
			uris, _ := steps["resources"]["uris"].([]any)
			if !slices.Contains(uris, any("policy://current")) {
				t.Errorf("resources = %v", uris)
			}
			prompts, _ := steps["prompts"]["names"].([]any)
			if !slices.Contains(prompts, any("safe_terminal_task")) || !slices.Contains(prompts, any("diagnose_failure")) {
				t.Errorf("prompts = %v", prompts)
			}
		})
	}
}

// runTypeScriptClient runs the TypeScript SDK client (client.mjs) over tr
// as nobody, approves the plans it asks to be approved, and returns each
// step it printed, by name. The client is stopped when the (sub)test ends.
func runTypeScriptClient(t *testing.T, d *harness.Daemon, tr transport, node, dir string) map[string]map[string]any {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=/tmp", "PROTO=" + tr.version, "BIN=" + harness.Bin(t, "termd-mcp"), "SOCKET=" + d.Socket, "WORKSPACE=" + d.Workspace}
	if tr.http {
		hb := startHTTPBridge(t, d)
		env = append(env, "TRANSPORT=http", "URL="+hb.URL, "TOKEN="+hb.Token)
	} else {
		env = append(env, "TRANSPORT=stdio")
	}
	cmd := exec.Command(node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: harness.Nobody}
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Stopped when the subtest ends, after its checks: a failed check
	// still shows node's stderr.
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("node stderr:\n%s", stderr.String())
		}
	})
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("node printed %q", sc.Text())
		}
		step := str(m, "step")
		steps[step] = m
		if e := str(m, "error"); e != "" {
			t.Fatalf("%s: %s", step, e)
		}
		if step == "approve" || step == "approve_repl" {
			p, _ := m["sc"].(map[string]any)
			id := str(p, "plan_id")
			if str(p, "state") != "awaiting_approval" || !strings.Contains(str(m, "text"), "termctl --socket "+d.Socket+" approve "+id) {
				t.Errorf("%s plan: %v", step, m)
			}
			if out, errOut, code := d.Run("termctl", "approve", id); code != 0 {
				t.Fatalf("termctl approve %s: %d %s %s", id, code, out, errOut)
			}
			stdin.Write([]byte("approved\n"))
		}
	}
	if steps["done"] == nil {
		t.Fatalf("the TypeScript client did not finish; steps: %v", steps)
	}
	return steps
}
