package cli_test

import "testing"

func TestReplanMakesANewPlan(t *testing.T) {
	d := start(t)
	p := plan(t, d, []string{"--mode", "confirm"}, "touch", "again.txt")
	np := decode[planJSON](t, ok(t, d, "replan", p.ID, "-o", "json"))
	if np.ID == "" || np.ID == p.ID || np.ReplannedFrom != p.ID {
		t.Fatalf("replan should make a new plan from %s, got %+v", p.ID, np)
	}
	if np.State != "awaiting_approval" {
		t.Fatalf("the new plan is decided again (ask), got %s", np.State)
	}
	expect(t, d, 1, "replan", "no-such-plan")
}
