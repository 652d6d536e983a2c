package e2e

import (
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Reads outside the workspace ask in confirm mode, except toolchain
// directories and a few public facts (paths.public_read in the default
// policy): an agent reads headers and the OS release without asking, but
// not /etc as a whole.
func TestReadsOutsideTheWorkspace(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	p := plan(t, d.Client, "", "cat", "/etc/passwd")
	if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || !strings.Contains(strings.Join(p.Decision.Reasons, "; "), "public_read") {
		t.Fatalf("cat /etc/passwd in confirm mode must ask, naming public_read; got %v %v", p.State, p.Decision.Reasons)
	}
	for _, c := range []struct{ path, want string }{
		{"/etc/os-release", "ID="},
		{"/usr/include/stdio.h", "stdio"},
	} {
		p := plan(t, d.Client, "", "cat", c.path)
		if p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
			t.Fatalf("cat %s must run without approval; got %v %v", c.path, p.State, p.Decision.Reasons)
		}
		ex, _, out, errOut := runToEnd(t, d.Client, p)
		if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED || !strings.Contains(out, c.want) {
			t.Fatalf("cat %s: %v %q %s", c.path, ex.State, clipOut(out), errOut)
		}
	}
}

func clipOut(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
