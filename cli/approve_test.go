package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// TestAgentPlanOperatorApproves walks the approval flow across two users:
// an agent plans, the operator sees it pending with its hash and approves,
// the agent executes.
func TestAgentPlanOperatorApproves(t *testing.T) {
	d := startWithAgent(t)
	out, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "plan", "-o", "json", "--mode", "confirm", "--", "touch", "approved.txt")
	if code != 0 {
		t.Fatalf("agent plan: exit %d %s", code, errOut)
	}
	p := decode[planJSON](t, out)
	if p.State != "awaiting_approval" {
		t.Fatalf("want awaiting approval, got %s", p.State)
	}

	// The agent may not approve its own plan, and sees nothing to approve.
	_, errOut, code = d.RunAs(harness.Nobody, "termctl", nil, "approve", p.ID)
	if code == 0 {
		t.Fatal("an agent approved its own plan")
	}
	if strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("errors are one line, got %q", errOut)
	}
	out, _, _ = d.RunAs(harness.Nobody, "termctl", nil, "pending", "-o", "json")
	if strings.Contains(out, p.ID) {
		t.Fatalf("pending should list only plans the caller may approve:\n%s", out)
	}

	// The operator sees it with its canonical request and hash.
	pending := ok(t, d, "pending")
	for _, want := range []string{p.ID, p.Decision.RequestHash, "touch approved.txt", "termctl approve " + p.ID} {
		if !strings.Contains(pending, want) {
			t.Errorf("pending lacks %q:\n%s", want, pending)
		}
	}
	list := decode[struct {
		Plans []planJSON `json:"plans"`
	}](t, ok(t, d, "pending", "-o", "json"))
	if len(list.Plans) != 1 || list.Plans[0].ID != p.ID {
		t.Fatalf("pending -o json: want the one plan, got %+v", list.Plans)
	}

	// A stale hash is refused; the right one approves and is shown.
	expect(t, d, 125, "approve", p.ID, "--hash", strings.Repeat("0", 64))
	out = ok(t, d, "approve", p.ID, "--hash", p.Decision.RequestHash)
	for _, want := range []string{"approved plan " + p.ID, p.Decision.RequestHash, "argv", "touch approved.txt", "termctl execute " + p.ID} {
		if !strings.Contains(out, want) {
			t.Errorf("approve should show %q:\n%s", want, out)
		}
	}

	out, errOut, code = d.RunAs(harness.Nobody, "termctl", nil, "execute", p.ID, "--follow")
	if code != 0 {
		t.Fatalf("the agent should run the approved plan: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "approved.txt")); err != nil {
		t.Fatal("the approved command did not run")
	}
}

func TestDenyRecordsReason(t *testing.T) {
	d := start(t)
	p := plan(t, d, []string{"--mode", "confirm"}, "touch", "denied.txt")
	_, errOut := expect(t, d, 2, "deny", p.ID)
	if !strings.Contains(errOut, "--reason") {
		t.Fatalf("deny without a reason should ask for one, got %q", errOut)
	}
	out := ok(t, d, "deny", p.ID, "--reason", "not today")
	if !strings.Contains(out, "denied plan "+p.ID) || !strings.Contains(out, "not today") {
		t.Fatalf("deny should confirm with the reason, got %q", out)
	}
	_, errOut = expect(t, d, 125, "execute", p.ID, "--follow")
	if !strings.Contains(errOut, p.ID) {
		t.Fatalf("executing a denied plan should be refused naming it, got %q", errOut)
	}
	if out := ok(t, d, "pending"); !strings.Contains(out, "no plans await") {
		t.Fatalf("nothing should be pending after the denial:\n%s", out)
	}
}
