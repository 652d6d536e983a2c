package plans

import (
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// MayApprove says whether caller may approve or deny p.
func MayApprove(caller *termdv1.Principal, p *termdv1.Plan) error {
	if !domain.IsOperator(caller) {
		return errdefs.Permission("only operators approve plans; ask an operator to run `termctl approve %s`", p.Id)
	}
	req := p.Requester
	if req.GetRole() == termdv1.Role_ROLE_AGENT && domain.PrincipalKey(req) == domain.PrincipalKey(caller) {
		return errdefs.Permission("plan %s was requested by you as an agent; an agent cannot approve its own plan", p.Id)
	}
	return nil
}

// Listed says whether listing r shows caller plan p, of session sessionID
// owned by owner: a plan caller may see, of the session and in a state
// asked for, and awaiting caller's approval when only those are asked for.
func Listed(caller *termdv1.Principal, r *termdv1.ListPlansRequest, p *termdv1.Plan, sessionID string, owner *termdv1.Principal) bool {
	if !domain.Visible(caller, owner) || (r.SessionId != "" && sessionID != r.SessionId) {
		return false
	}
	if len(r.States) > 0 && !slices.Contains(r.States, p.State) {
		return false
	}
	return !r.ApprovableOnly || (domain.PlanStateOf(p.State) == domain.PlanAwaitingApproval && MayApprove(caller, p) == nil)
}

// Newest are copies of the newest limit plans of out (all when limit is
// 0), newest first.
func Newest(out []*termdv1.Plan, limit int32) []*termdv1.Plan {
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.AsTime().After(out[j].CreatedAt.AsTime()) })
	if limit > 0 && len(out) > int(limit) {
		out = out[:limit]
	}
	for i := range out {
		out[i] = proto.Clone(out[i]).(*termdv1.Plan)
	}
	return out
}
