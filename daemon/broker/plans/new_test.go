package plans

import (
	"testing"
	"time"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newPlan(now time.Time) *termdv1.Plan {
	return New(Made{SessionID: "s1", From: "p0", Requester: agent, Request: &termdv1.CommandRequest{Argv: []string{"ls"}},
		Decision: &termdv1.Decision{RequestHash: "h1", Sandbox: &termdv1.SandboxProfile{}}, Preview: &termdv1.Preview{Sandbox: &termdv1.SandboxProfile{}},
		Timeout: 90 * time.Second, Limits: policy.Limits{OutputBytes: 10, MemoryBytes: 20, Pids: 30, Grace: 2 * time.Second}, Enforcement: "full"}, now)
}

// A new plan has a fresh id, its requester's copy, the limits it runs
// under and this host's enforcement; its verdict says its first state.
func TestNewAndDecided(t *testing.T) {
	now := time.Unix(50, 0)
	p, q := newPlan(now), newPlan(now)
	if p.Id == "" || p.Id == q.Id || p.Requester == agent || p.Requester.Name != agent.Name || p.ReplannedFrom != "p0" || p.SessionId != "s1" {
		t.Errorf("plan %v", p)
	}
	if l := p.Limits; l.TimeoutSeconds != 90 || l.OutputBytes != 10 || l.MemoryBytes != 20 || l.Pids != 30 || l.GraceSeconds != 2 {
		t.Errorf("limits %v", l)
	}
	if p.Decision.Sandbox.Enforcement != "full" || p.Preview.Sandbox.Enforcement != "full" || !p.CreatedAt.AsTime().Equal(now) {
		t.Errorf("enforcement %q/%q, created %v", p.Decision.Sandbox.Enforcement, p.Preview.Sandbox.Enforcement, p.CreatedAt)
	}
	exp := now.Add(time.Hour)
	for _, c := range []struct {
		v       policy.Verdict
		covered bool
		want    domain.PlanState
		expires bool
	}{
		{policy.Allow, false, domain.PlanPlanned, true},
		{policy.Ask, false, domain.PlanAwaitingApproval, true},
		{policy.Ask, true, domain.PlanApproved, true},
		{policy.Deny, true, domain.PlanBlocked, false},
	} {
		p := newPlan(now)
		st := Decided(p, c.v, c.covered, exp)
		if st != c.want || (p.ExpiresAt != nil) != c.expires || (c.expires && !p.ExpiresAt.AsTime().Equal(exp)) {
			t.Errorf("%s (covered %v): %s expiring %v", c.v, c.covered, st, p.ExpiresAt)
		}
		if err := Move(p, st, now); err != nil {
			t.Errorf("%s: the first state is not in the table: %v", c.v, err)
		}
	}
}

// Only a plan awaiting approval is approved, and only as the request whose
// hash the approver passes; a denial needs a reason.
func TestCheckApproval(t *testing.T) {
	p := newPlan(time.Unix(1, 0))
	Decided(p, policy.Ask, false, time.Unix(2, 0))
	if err := Move(p, domain.PlanAwaitingApproval, time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := CheckApproval(p, "h1"); err != nil {
		t.Errorf("the right hash: %v", err)
	}
	if err := CheckApproval(p, ""); errdefs.KindOf(err) != errdefs.KindInvalid {
		t.Errorf("no hash: %v", err)
	}
	if err := CheckApproval(p, "h2"); errdefs.KindOf(err) != errdefs.KindPrecondition {
		t.Errorf("another hash: %v", err)
	}
	if err := Move(p, domain.PlanExpired, time.Unix(3, 0)); err != nil {
		t.Fatal(err)
	}
	if err := CheckApproval(p, "h1"); errdefs.KindOf(err) != errdefs.KindPrecondition {
		t.Errorf("an expired plan: %v", err)
	}
	if r, err := DenialReason("  no \n"); r != "no" || err != nil {
		t.Errorf("reason %q, %v", r, err)
	}
	if _, err := DenialReason(" \t"); errdefs.KindOf(err) != errdefs.KindInvalid {
		t.Errorf("blank reason: %v", err)
	}
}
