package plans

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Move is the one place a plan's state changes (domain.PlanState.CanBecome).
func Move(p *termdv1.Plan, to domain.PlanState, now time.Time) error {
	from := domain.PlanStateOf(p.State)
	if !from.CanBecome(to) {
		return errdefs.Precondition("plan %s is in state %s; it cannot become %s%s", p.Id, from, to, Hint(p))
	}
	p.State = to.Proto()
	p.UpdatedAt = timestamppb.New(now)
	p.NextStep = NextStep(p)
	return nil
}

// RestoreFinal settles a plan restored from the journal at start in the
// final state the receipt store proves (the journal writes start and finish
// lazily, so it may still say approved or running). It is not a transition:
// the move happened before the restart; only final states are accepted.
func RestoreFinal(p *termdv1.Plan, to termdv1.PlanState, receiptID string) {
	if !domain.PlanStateOf(to).IsFinal() {
		panic("broker: restoring plan " + p.Id + " to a non-final state " + domain.PlanStateOf(to).String())
	}
	p.State, p.ReceiptId = to, receiptID
	p.NextStep = NextStep(p)
}

// Approve records caller's approval of the request with hash requestHash,
// valid until exp.
func Approve(p *termdv1.Plan, caller *termdv1.Principal, requestHash string, now, exp time.Time) {
	p.Approval = &termdv1.Approval{Approver: proto.Clone(caller).(*termdv1.Principal), ApprovedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(exp), RequestHash: requestHash}
	p.ExpiresAt = timestamppb.New(exp)
	p.NextStep = NextStep(p)
}

// Deny records caller's denial of p for reason (redacted by the caller).
func Deny(p *termdv1.Plan, caller *termdv1.Principal, reason string, now time.Time) {
	p.Denial = &termdv1.Denial{DeniedBy: proto.Clone(caller).(*termdv1.Principal), DeniedAt: timestamppb.New(now), Reason: reason}
	p.ExpiresAt = nil
	p.NextStep = NextStep(p)
}

// Hint is what a refused state change adds to its error: what may be done
// with the plan in its state.
func Hint(p *termdv1.Plan) string {
	st := domain.PlanStateOf(p.State)
	switch st {
	case domain.PlanAwaitingApproval:
		return fmt.Sprintf(" (it is awaiting approval: an operator runs `termctl approve %s`)", p.Id)
	case domain.PlanApproved, domain.PlanPlanned:
		return fmt.Sprintf(" (it may run now: `termctl execute %s --follow`)", p.Id)
	case domain.PlanBlocked:
		return " (the policy denied it: " + strings.Join(p.Decision.GetReasons(), "; ") + ")"
	case domain.PlanExpired, domain.PlanDenied:
		return fmt.Sprintf(" (run `termctl replan %s` to decide it again)", p.Id)
	case domain.PlanRunning, domain.PlanPaused:
		return " (a plan runs at most once; it is running now)"
	}
	if st.IsFinal() {
		return fmt.Sprintf(" (a plan runs at most once; run `termctl replan %s` to run it again)", p.Id)
	}
	return ""
}

// NextStep is the plan's next_step: what its state lets whom do next.
func NextStep(p *termdv1.Plan) string {
	st := domain.PlanStateOf(p.State)
	switch st {
	case domain.PlanPlanned:
		return fmt.Sprintf("allowed: run it now (`termctl execute %s --follow`)", p.Id)
	case domain.PlanAwaitingApproval:
		return fmt.Sprintf("needs approval: an operator runs `termctl approve %s` (or approves it in the console); then execute it", p.Id)
	case domain.PlanApproved:
		if p.GrantId != "" {
			return fmt.Sprintf("approved by grant %s (an operator's remembered approval): run it with `termctl execute %s --follow` before the approval expires", p.GrantId, p.Id)
		}
		return fmt.Sprintf("approved: run it with `termctl execute %s --follow` before the approval expires", p.Id)
	case domain.PlanBlocked:
		return "denied by policy: change the command (see the reasons); it cannot be approved"
	case domain.PlanDenied:
		return "denied by " + p.Denial.GetDeniedBy().GetName() + ": " + p.Denial.GetReason()
	case domain.PlanExpired:
		return fmt.Sprintf("expired: run `termctl replan %s` to decide it again", p.Id)
	case domain.PlanRunning, domain.PlanPaused:
		if p.GetDecision().GetTty() != nil {
			return fmt.Sprintf("running on a terminal as execution %s: attach to it with `termctl attach %s` (or type into it in the console), read its screen with `termctl screen %s`, or pause/cancel it", p.ExecutionId, p.ExecutionId, p.ExecutionId)
		}
		return fmt.Sprintf("running as execution %s: follow it with `termctl output %s` or pause/cancel it", p.ExecutionId, p.ExecutionId)
	}
	if st.IsFinal() {
		return fmt.Sprintf("finished: its receipt is %s (`termctl receipts show %s`)", p.ReceiptId, p.ReceiptId)
	}
	return ""
}

// Flag records the adviser's answer on p: the digest of its advice and,
// when it flagged the plan, raised scrutiny: a planned plan now awaits
// approval (raised; the caller accounts for the move). Scrutiny is never
// lowered.
func Flag(p *termdv1.Plan, digest string, flagged bool, now time.Time) (raised bool, err error) {
	p.AdviceDigest = digest
	if !flagged {
		return false, nil
	}
	p.FlaggedByAdviser = true
	if domain.PlanStateOf(p.State) != domain.PlanPlanned {
		return false, nil
	}
	if err := Move(p, domain.PlanAwaitingApproval, now); err != nil {
		return false, err
	}
	// A new decision, not one written into: snapshots share the old one.
	d := proto.Clone(p.Decision).(*termdv1.Decision)
	d.Reasons = append(d.Reasons, "the adviser flagged this plan as dangerous; it needs approval")
	p.Decision = d
	return true, nil
}
