package plans

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

var (
	operator = &termdv1.Principal{Name: "root", Uid: 0, Role: termdv1.Role_ROLE_OPERATOR}
	agent    = &termdv1.Principal{Name: "bot", Uid: 1000, Role: termdv1.Role_ROLE_AGENT}
	other    = &termdv1.Principal{Name: "eve", Uid: 1001, Role: termdv1.Role_ROLE_AGENT}
)

// Operators approve; an agent never approves, not even its own plan as an
// operator would.
func TestMayApprove(t *testing.T) {
	p := &termdv1.Plan{Id: "p1", Requester: agent}
	if err := MayApprove(operator, p); err != nil {
		t.Errorf("operator: %v", err)
	}
	if err := MayApprove(agent, p); errdefs.KindOf(err) != errdefs.KindPermission {
		t.Errorf("agent: %v", err)
	}
	selfOp := &termdv1.Principal{Name: "bot", Uid: 1000, Role: termdv1.Role_ROLE_OPERATOR}
	if err := MayApprove(selfOp, p); err == nil {
		t.Errorf("the requester as an operator approved its own agent plan")
	}
}

// A listing shows what the caller may see, of the session and states asked
// for, approvable ones only when asked, newest first and cut to the limit.
func TestListed(t *testing.T) {
	at := func(s int64) *timestamppb.Timestamp { return timestamppb.New(time.Unix(s, 0)) }
	type held struct {
		p       *termdv1.Plan
		session string
		owner   *termdv1.Principal
	}
	all := []held{
		{&termdv1.Plan{Id: "a1", Requester: agent, CreatedAt: at(1), State: termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL}, "s1", agent},
		{&termdv1.Plan{Id: "a2", Requester: agent, CreatedAt: at(3), State: termdv1.PlanState_PLAN_STATE_PLANNED}, "s2", agent},
		{&termdv1.Plan{Id: "e1", Requester: other, CreatedAt: at(2), State: termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL}, "s3", other},
	}
	list := func(caller *termdv1.Principal, r *termdv1.ListPlansRequest) []string {
		var out []*termdv1.Plan
		for _, h := range all {
			if Listed(caller, r, h.p, h.session, h.owner) {
				out = append(out, h.p)
			}
		}
		var ids []string
		for _, p := range Newest(out, r.Limit) {
			ids = append(ids, p.Id)
		}
		return ids
	}
	cases := []struct {
		caller *termdv1.Principal
		r      *termdv1.ListPlansRequest
		want   []string
	}{
		{operator, &termdv1.ListPlansRequest{}, []string{"a2", "e1", "a1"}},
		{operator, &termdv1.ListPlansRequest{Limit: 2}, []string{"a2", "e1"}},
		{agent, &termdv1.ListPlansRequest{}, []string{"a2", "a1"}},
		{operator, &termdv1.ListPlansRequest{SessionId: "s1"}, []string{"a1"}},
		{operator, &termdv1.ListPlansRequest{States: []termdv1.PlanState{termdv1.PlanState_PLAN_STATE_PLANNED}}, []string{"a2"}},
		{operator, &termdv1.ListPlansRequest{ApprovableOnly: true}, []string{"e1", "a1"}},
		{agent, &termdv1.ListPlansRequest{ApprovableOnly: true}, nil},
	}
	for _, c := range cases {
		if got := list(c.caller, c.r); !slices.Equal(got, c.want) {
			t.Errorf("%s lists %v: %v, want %v", c.caller.Name, c.r, got, c.want)
		}
	}
	out := Newest([]*termdv1.Plan{all[0].p}, 0)
	if out[0] == all[0].p {
		t.Error("Newest returned the held plan, not a copy")
	}
}
