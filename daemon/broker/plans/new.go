package plans

import (
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Made is what a new plan is made of: its request and decision as the API
// shows them (redacted), the decision's timeout, the policy's limits and
// the sandbox enforcement of this host.
type Made struct {
	SessionID   string
	From        string // the plan it replans ("" for none)
	Requester   *termdv1.Principal
	Request     *termdv1.CommandRequest
	Decision    *termdv1.Decision
	Preview     *termdv1.Preview
	Timeout     time.Duration
	Limits      policy.Limits
	Enforcement string
}

// New is a new plan with a fresh id, in no state yet (Decided says which it
// takes).
func New(m Made, now time.Time) *termdv1.Plan {
	p := &termdv1.Plan{
		Id:            uuid.NewString(),
		SessionId:     m.SessionID,
		Request:       m.Request,
		Decision:      m.Decision,
		Preview:       m.Preview,
		Requester:     proto.Clone(m.Requester).(*termdv1.Principal),
		CreatedAt:     timestamppb.New(now),
		UpdatedAt:     timestamppb.New(now),
		ReplannedFrom: m.From,
		Limits: &termdv1.Limits{
			TimeoutSeconds: uint32(m.Timeout / time.Second),
			OutputBytes:    m.Limits.OutputBytes,
			MemoryBytes:    m.Limits.MemoryBytes,
			Pids:           m.Limits.Pids,
			GraceSeconds:   uint32(m.Limits.Grace / time.Second),
		},
	}
	p.Decision.Sandbox.Enforcement = m.Enforcement
	p.Preview.Sandbox.Enforcement = m.Enforcement
	return p
}

// Decided is the state verdict v gives a new plan: planned, awaiting
// approval (approved when a grant covers it: the grant then approves it)
// or blocked. A plan that may run expires at expires.
func Decided(p *termdv1.Plan, v policy.Verdict, covered bool, expires time.Time) domain.PlanState {
	switch v {
	case policy.Allow:
		p.ExpiresAt = timestamppb.New(expires)
		return domain.PlanPlanned
	case policy.Ask:
		p.ExpiresAt = timestamppb.New(expires)
		if covered {
			return domain.PlanApproved
		}
		return domain.PlanAwaitingApproval
	}
	return domain.PlanBlocked
}

// CheckApproval says why p cannot be approved as the request of hash
// requestHash: it is not awaiting approval, or the approver did not pass
// the hash of the request it shows.
func CheckApproval(p *termdv1.Plan, requestHash string) error {
	if st := domain.PlanStateOf(p.State); st != domain.PlanAwaitingApproval {
		return errdefs.Precondition("plan %s is %s, not awaiting approval%s", p.Id, st, Hint(p))
	}
	if requestHash == "" {
		return errdefs.Invalid("request_hash is empty: approve the exact request you reviewed by passing its hash (%s)", p.Decision.RequestHash)
	}
	if requestHash != p.Decision.RequestHash {
		return errdefs.Precondition("request_hash %s does not match plan %s (%s): review the plan again before approving", requestHash, p.Id, p.Decision.RequestHash)
	}
	return nil
}

// DenialReason is a denial's reason trimmed; a denial needs one.
func DenialReason(reason string) (string, error) {
	if reason = strings.TrimSpace(reason); reason == "" {
		return "", errdefs.Invalid("a denial needs a reason (e.g. --reason \"writes outside the task\")")
	}
	return reason, nil
}
