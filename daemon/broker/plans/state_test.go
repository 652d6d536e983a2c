package plans

import (
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/domain"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Every pair of states: a move is allowed exactly when the table lists it,
// and a refused move names the current state.
func TestTransitionTable(t *testing.T) {
	for _, f := range domain.PlanStates() {
		for _, tt := range domain.PlanStates() {
			p := &termdv1.Plan{Id: "p1", State: f.Proto()}
			err := Move(p, tt, time.Unix(1, 0))
			allowed := false
			for _, s := range f.Next() {
				allowed = allowed || s == tt
			}
			switch {
			case allowed && err != nil:
				t.Errorf("%s -> %s: %v", f, tt, err)
			case allowed && (p.State != tt.Proto() || p.UpdatedAt.AsTime() != time.Unix(1, 0).UTC()):
				t.Errorf("%s -> %s: state %s, updated %v", f, tt, p.State, p.UpdatedAt)
			case !allowed && err == nil:
				t.Errorf("%s -> %s was allowed; the table does not list it", f, tt)
			case !allowed && (p.State != f.Proto() || !strings.Contains(err.Error(), "in state "+f.String())):
				t.Errorf("%s -> %s: state now %s, error %v", f, tt, p.State, err)
			}
		}
	}
	// Final states are final.
	for _, s := range domain.PlanStates() {
		if s.IsFinal() && len(s.Next()) > 0 {
			t.Errorf("final state %s has transitions", s)
		}
	}
}

// Every state says what comes next and, when a change is refused, what may
// be done instead; the texts name the plan, its execution, grant or receipt
// so they can be pasted.
func TestNextStepAndHint(t *testing.T) {
	for _, s := range domain.PlanStates() {
		p := &termdv1.Plan{Id: "p1", State: s.Proto(), ExecutionId: "e1", ReceiptId: "r1",
			Decision: &termdv1.Decision{Reasons: []string{"rm -rf is refused"}},
			Denial:   &termdv1.Denial{DeniedBy: &termdv1.Principal{Name: "alice"}, Reason: "not now"}}
		next, hint := NextStep(p), Hint(p)
		if s == domain.PlanUnspecified {
			if next != "" || hint != "" {
				t.Errorf("unspecified: next %q, hint %q", next, hint)
			}
			continue
		}
		if next == "" || hint == "" {
			t.Errorf("%s: next %q, hint %q", s, next, hint)
		}
		want := map[domain.PlanState]string{domain.PlanRunning: "execution e1", domain.PlanPaused: "termctl output e1",
			domain.PlanDenied: "denied by alice: not now", domain.PlanBlocked: "denied by policy", domain.PlanSucceeded: "receipts show r1",
			domain.PlanExpired: "termctl replan p1", domain.PlanAwaitingApproval: "termctl approve p1"}[s]
		if !strings.Contains(next, want) {
			t.Errorf("%s: next step %q does not say %q", s, next, want)
		}
	}
	p := &termdv1.Plan{Id: "p1", State: termdv1.PlanState_PLAN_STATE_BLOCKED, Decision: &termdv1.Decision{Reasons: []string{"a", "b"}}}
	if h := Hint(p); h != " (the policy denied it: a; b)" {
		t.Errorf("blocked hint %q", h)
	}
	p = &termdv1.Plan{Id: "p1", State: termdv1.PlanState_PLAN_STATE_RUNNING, ExecutionId: "e1", Decision: &termdv1.Decision{Tty: &termdv1.TerminalOptions{}}}
	if n := NextStep(p); !strings.Contains(n, "termctl attach e1") {
		t.Errorf("terminal next step %q", n)
	}
	p = &termdv1.Plan{Id: "p1", State: termdv1.PlanState_PLAN_STATE_APPROVED, GrantId: "g1"}
	if n := NextStep(p); !strings.Contains(n, "approved by grant g1") {
		t.Errorf("grant next step %q", n)
	}
}

// Approving and denying record who, when and why, and the next step follows;
// a restored plan takes only a final state.
func TestApproveDenyRestore(t *testing.T) {
	op := &termdv1.Principal{Name: "alice", Role: termdv1.Role_ROLE_OPERATOR}
	now := time.Unix(100, 0)
	p := &termdv1.Plan{Id: "p1", State: termdv1.PlanState_PLAN_STATE_APPROVED}
	Approve(p, op, "h1", now, now.Add(time.Minute))
	op.Name = "changed" // the plan keeps its own copy
	a := p.Approval
	if a.Approver.Name != "alice" || a.RequestHash != "h1" || !a.ApprovedAt.AsTime().Equal(now) || !p.ExpiresAt.AsTime().Equal(now.Add(time.Minute)) || !strings.HasPrefix(p.NextStep, "approved:") {
		t.Errorf("approved plan %v", p)
	}
	p = &termdv1.Plan{Id: "p2", State: termdv1.PlanState_PLAN_STATE_DENIED, ExpiresAt: a.ExpiresAt}
	Deny(p, op, "no", now)
	if p.Denial.DeniedBy.Name != "changed" || p.Denial.Reason != "no" || p.ExpiresAt != nil || p.NextStep != "denied by changed: no" {
		t.Errorf("denied plan %v", p)
	}
	RestoreFinal(p, termdv1.PlanState_PLAN_STATE_SUCCEEDED, "r9")
	if p.State != termdv1.PlanState_PLAN_STATE_SUCCEEDED || p.ReceiptId != "r9" || !strings.Contains(p.NextStep, "r9") {
		t.Errorf("restored plan %v", p)
	}
	defer func() {
		if recover() == nil {
			t.Error("restoring a plan to running did not panic")
		}
	}()
	RestoreFinal(p, termdv1.PlanState_PLAN_STATE_RUNNING, "r9")
}

// The adviser's flag raises a planned plan to awaiting approval with a
// reason; it never lowers scrutiny, and an unflagged answer only records
// its digest.
func TestFlag(t *testing.T) {
	now := time.Unix(7, 0)
	planned := func() *termdv1.Plan {
		return &termdv1.Plan{Id: "p1", State: termdv1.PlanState_PLAN_STATE_PLANNED, Decision: &termdv1.Decision{}}
	}
	p := planned()
	if raised, err := Flag(p, "d1", false, now); raised || err != nil || p.AdviceDigest != "d1" || p.FlaggedByAdviser || p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Errorf("unflagged: %v %v %v", raised, err, p)
	}
	if raised, err := Flag(p, "d2", true, now); !raised || err != nil || !p.FlaggedByAdviser || p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || len(p.Decision.Reasons) != 1 {
		t.Errorf("flagged: %v %v %v", raised, err, p)
	}
	if raised, _ := Flag(p, "d3", false, now); raised || !p.FlaggedByAdviser || p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Errorf("scrutiny lowered: %v", p)
	}
	p = planned()
	p.State = termdv1.PlanState_PLAN_STATE_SUCCEEDED
	if raised, err := Flag(p, "d4", true, now); raised || err != nil || p.State != termdv1.PlanState_PLAN_STATE_SUCCEEDED || !p.FlaggedByAdviser {
		t.Errorf("a finished plan: %v %v %v", raised, err, p)
	}
}
