package mcpbridge_test

import (
	"strings"
	"testing"
)

// terminal_run and terminal_plan take an optional stdin: the command reads
// it (cat echoes it back), and a plan's decision describes it by size.
func TestRunStdinArgument(t *testing.T) {
	d := startDaemon(t)
	cs := connect(t, d, transports[0], &clientRecorder{}, false)
	run, res := call(t, cs, "terminal_run", map[string]any{"argv": []string{"cat"}, "stdin": "from the agent\n", "detail": true}, false)
	if res.IsError || str(run, "state") != "succeeded" || str(run, "stdout") != "from the agent\n" {
		t.Fatalf("terminal_run cat with stdin: %s", text(res))
	}
	plan, pres := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"cat"}, "stdin": "xyz"}, false)
	if pres.IsError {
		t.Fatalf("terminal_plan cat with stdin: %s", text(pres))
	}
	_, eres := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id"), "wait_seconds": 60}, false)
	if eres.IsError || !strings.Contains(text(eres), "xyz") {
		t.Fatalf("terminal_execute of a plan with stdin: %s", text(eres))
	}
}
