package mcpbridge_test

import (
	"strings"
	"testing"
)

// terminal_history finds the agent's own receipts by a phrase from their
// output, never the operator's, treats search syntax as text, and names the
// fix for an empty phrase.
func TestHistorySearchesOwnReceipts(t *testing.T) {
	d := startDaemon(t)
	if out, errOut, code := d.Run("termctl", "run", "--", "echo", "history-probe from the operator"); code != 0 {
		t.Fatalf("operator run: %d %s %s", code, out, errOut)
	}
	cs := connect(t, d, transports[0], &clientRecorder{}, false)
	plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"echo", "history-probe from the agent", "a OR b"}}, false)
	if res.IsError {
		t.Fatalf("plan: %s", text(res))
	}
	ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id")}, false)
	if res.IsError || str(ex, "state") != "succeeded" {
		t.Fatalf("execute: %s", text(res))
	}

	got, res := call(t, cs, "terminal_history", map[string]any{"query": "history-probe"}, false)
	hits, _ := got["hits"].([]any)
	if res.IsError || len(hits) != 1 {
		t.Fatalf("terminal_history should find only the agent's own receipt: %s", text(res))
	}
	hit := hits[0].(map[string]any)
	if str(hit, "receipt_id") != str(ex, "receipt_id") || !strings.Contains(str(hit, "snippet"), "history-probe from the agent") {
		t.Fatalf("hit: %v, want receipt %s", hit, str(ex, "receipt_id"))
	}
	if !strings.Contains(text(res), "history-probe from the agent") || strings.Contains(text(res), "operator") {
		t.Fatalf("the text summary: %s", text(res))
	}
	// The receipt id reads the receipt.
	if rc, res := call(t, cs, "terminal_receipt", map[string]any{"receipt_id": str(hit, "receipt_id")}, false); res.IsError || str(rc, "receipt_id") != str(hit, "receipt_id") {
		t.Fatalf("terminal_receipt of the hit: %s", text(res))
	}
	for q, want := range map[string]int{"a OR b": 1, "b OR a": 0, "*": 0, "from the operator": 0} {
		got, res := call(t, cs, "terminal_history", map[string]any{"query": q}, false)
		if hits, _ := got["hits"].([]any); res.IsError || len(hits) != want {
			t.Errorf("terminal_history %q: want %d hits: %s", q, want, text(res))
		}
	}
	_, res = call(t, cs, "terminal_history", map[string]any{"query": ""}, false)
	if !res.IsError || !strings.Contains(text(res), "empty") {
		t.Fatalf("an empty query should be an error naming the fix: %s", text(res))
	}
}

// terminal_history's since and until take what termctl's --since and
// --until take (client.ParseWhen): a date as well as RFC 3339 or a
// duration ago; anything else is an error naming the forms.
func TestHistoryTimeFilters(t *testing.T) {
	d := startDaemon(t)
	cs := connect(t, d, transports[0], &clientRecorder{}, false)
	if run, res := call(t, cs, "terminal_run", map[string]any{"argv": []string{"echo", "when-probe"}}, false); res.IsError || str(run, "state") != "succeeded" {
		t.Fatalf("run: %s", text(res))
	}
	for args, want := range map[[2]string]int{
		{"2000-01-01", ""}:                     1,
		{"", "2000-01-01 00:00:00"}:            0,
		{"1h", ""}:                             1,
		{"2000-01-01T00:00:00Z", "2000-01-02"}: 0,
	} {
		got, res := call(t, cs, "terminal_history", map[string]any{"query": "when-probe", "since": args[0], "until": args[1]}, false)
		if hits, _ := got["hits"].([]any); res.IsError || len(hits) != want {
			t.Errorf("terminal_history since %q until %q: want %d hits: %s", args[0], args[1], want, text(res))
		}
	}
	_, res := call(t, cs, "terminal_history", map[string]any{"query": "when-probe", "since": "yesterday"}, false)
	if !res.IsError || !strings.Contains(text(res), "2006-01-02") || !strings.Contains(text(res), "since") {
		t.Fatalf("since yesterday should be an error naming the argument and the forms: %s", text(res))
	}
}
