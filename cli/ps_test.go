package cli_test

import (
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// psJSON is the part of `termctl ps -o json` the tests read.
type psJSON struct {
	Executions []struct {
		Execution struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"execution"`
		Argv []string `json:"argv"`
	} `json:"executions"`
}

// termctl ps lists what is running in the background: an agent its own
// executions only, the operator everyone's; --all adds what has ended.
func TestPsListsRunningExecutions(t *testing.T) {
	d := startWithAgent(t)
	mine := startExecution(t, d, plan(t, d, nil, "sleep", "30").ID)
	ok(t, d, "run", "--", "true")

	out, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "plan", "-o", "json", "--", "sleep", "31")
	if code != 0 {
		t.Fatalf("agent plan: %d %s", code, errOut)
	}
	agentPlan := decode[planJSON](t, out)
	if _, errOut, code = d.RunAs(harness.Nobody, "termctl", nil, "execute", agentPlan.ID); code != 0 {
		t.Fatalf("agent execute: %d %s", code, errOut)
	}

	table := ok(t, d, "ps")
	if !strings.Contains(table, mine) || !strings.Contains(table, "sleep 30") || !strings.Contains(table, "sleep 31") || strings.Contains(table, " true") {
		t.Fatalf("operator's ps should list both sleeps and not the finished true:\n%s", table)
	}
	out, errOut, code = d.RunAs(harness.Nobody, "termctl", nil, "ps", "-o", "json")
	if code != 0 {
		t.Fatalf("agent ps: %d %s", code, errOut)
	}
	got := decode[psJSON](t, out)
	if len(got.Executions) != 1 || got.Executions[0].Argv[1] != "31" || got.Executions[0].Execution.State != "running" {
		t.Fatalf("the agent should see only its own sleep 31: %s", out)
	}

	all := decode[psJSON](t, ok(t, d, "ps", "--all", "-o", "json"))
	if len(all.Executions) != 3 {
		t.Fatalf("ps --all: want 3 executions, got %d", len(all.Executions))
	}
	ended := decode[psJSON](t, ok(t, d, "ps", "--state", "succeeded", "-o", "json"))
	if len(ended.Executions) != 1 || ended.Executions[0].Argv[0] != "true" {
		t.Fatalf("ps --state succeeded: %+v", ended)
	}

	ok(t, d, "cancel", mine)
	if table := ok(t, d, "ps"); strings.Contains(table, mine) {
		t.Fatalf("a cancelled execution is still listed as running:\n%s", table)
	}
	_, errOut = expect(t, d, 2, "ps", "--state", "sleeping")
	if !strings.Contains(errOut, `--state "sleeping"`) || !strings.Contains(errOut, "running, paused") {
		t.Fatalf("a bad --state should say what to use: %s", errOut)
	}
	expect(t, d, 2, "ps", "--all", "--state", "running")
}
