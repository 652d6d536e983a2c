package mcpbridge_test

import (
	"slices"
	"strings"
	"testing"
)

// screenLines splits a terminal view's screen into trimmed lines.
func screenLines(v map[string]any) []string {
	var out []string
	for _, l := range strings.Split(str(v, "screen"), "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// A python3 REPL driven through MCP with the go-sdk client: the plan asks
// (typed input is code), the operator approves, terminal_execute answers
// with the prompt, terminal_send "1+1" reads 2 from the rendered screen
// and the REPL is waiting for input again; Ctrl-D ends it with a receipt.
func TestTerminalREPLOverMCP(t *testing.T) {
	d := startDaemon(t)
	cs := connect(t, d, transports[0], &clientRecorder{}, false)
	plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"python3"}, "tty": map[string]any{"rows": 24, "cols": 80}}, false)
	if res.IsError || str(plan, "state") != "awaiting_approval" {
		t.Fatalf("a python3 REPL should wait for approval: %s", text(res))
	}
	if out, errOut, code := d.Run("termctl", "approve", str(plan, "plan_id")); code != 0 {
		t.Fatalf("approve: %d %s %s", code, out, errOut)
	}
	ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id")}, false)
	term, _ := ex["terminal"].(map[string]any)
	if res.IsError || term == nil || str(term, "ready") != "waiting_for_input" || !strings.Contains(str(term, "screen"), ">>>") {
		t.Fatalf("terminal_execute of a REPL should answer with its prompt, waiting for input: %s", text(res))
	}
	id := str(ex, "execution_id")

	sent, res := call(t, cs, "terminal_send", map[string]any{"execution_id": id, "line": "1+1"}, false)
	if res.IsError || str(sent, "ready") != "waiting_for_input" || !slices.Contains(screenLines(sent), "2") || !strings.Contains(str(sent, "screen"), ">>>") {
		t.Fatalf("1+1 should show 2 on the screen, the REPL waiting for input: %s", text(res))
	}
	if !strings.Contains(text(res), "--- screen") || strings.Contains(str(sent, "screen"), "\x1b") {
		t.Errorf("the answer should show the screen as plain text: %q", text(res))
	}
	scr, res := call(t, cs, "terminal_screen", map[string]any{"plan_id": str(plan, "plan_id")}, false)
	if res.IsError || !slices.Contains(screenLines(scr), "2") || str(scr, "state") != "running" {
		t.Errorf("terminal_screen: %s", text(res))
	}
	if _, res := call(t, cs, "terminal_send", map[string]any{"execution_id": id, "keys": []string{"f5"}}, false); !res.IsError || !strings.Contains(text(res), "ctrl_c") {
		t.Errorf("an unknown key should be refused, naming the keys: %s", text(res))
	}

	end, res := call(t, cs, "terminal_send", map[string]any{"execution_id": id, "keys": []string{"ctrl_d"}}, false)
	if res.IsError || str(end, "ready") != "exited" {
		t.Fatalf("Ctrl-D should end the REPL: %s", text(res))
	}
	st, _ := call(t, cs, "terminal_status", map[string]any{"execution_id": id}, false)
	for i := 0; i < 100 && str(st, "receipt_id") == ""; i++ {
		st, _ = call(t, cs, "terminal_status", map[string]any{"execution_id": id}, false)
	}
	if str(st, "state") != "succeeded" || str(st, "receipt_id") == "" {
		t.Errorf("after Ctrl-D: %v", st)
	}
}
