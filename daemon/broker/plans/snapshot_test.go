package plans

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// A snapshot says what the plan says and shares its sub-messages: a plan's
// events hold one copy of its request and decision between them, not one
// each (the event rings held a quarter of termd's live heap in such copies
// at 32 clients).
func TestSnapshotSharesSubMessages(t *testing.T) {
	p := &termdv1.Plan{Id: "p1", SessionId: "s1", State: termdv1.PlanState_PLAN_STATE_PLANNED,
		Request:   &termdv1.CommandRequest{Command: "pwd", Cwd: "/w"},
		Decision:  &termdv1.Decision{Reasons: []string{"read-only"}, RequestHash: "h"},
		Preview:   &termdv1.Preview{Summary: "prints the working directory"},
		Requester: &termdv1.Principal{Name: "agent"}, CreatedAt: timestamppb.New(time.Unix(1, 0)),
		NextStep: "execute it", FlaggedByAdviser: true}
	s := Snapshot(p)
	if !proto.Equal(s, p) {
		t.Fatalf("snapshot %v, plan %v", s, p)
	}
	if s.Request != p.Request || s.Decision != p.Decision || s.Preview != p.Preview || s.Requester != p.Requester || s.CreatedAt != p.CreatedAt {
		t.Error("the snapshot copied the plan's sub-messages instead of sharing them")
	}
	// The plan's own fields are the snapshot's: later moves leave it alone.
	if err := Move(p, domain.PlanAwaitingApproval, time.Unix(2, 0)); err != nil {
		t.Fatal(err)
	}
	if s.State != termdv1.PlanState_PLAN_STATE_PLANNED || s.UpdatedAt != nil || s.NextStep != "execute it" {
		t.Errorf("a move changed the snapshot: %v", s)
	}
}

// Flag gives the plan a new decision rather than writing into the one its
// snapshots share, so an event published before the flag keeps its reasons.
func TestFlagLeavesSnapshotsAlone(t *testing.T) {
	p := &termdv1.Plan{Id: "p1", State: termdv1.PlanState_PLAN_STATE_PLANNED, Decision: &termdv1.Decision{Reasons: make([]string, 1, 4)}}
	p.Decision.Reasons[0] = "read-only"
	s := Snapshot(p)
	if raised, err := Flag(p, "d", true, time.Unix(3, 0)); !raised || err != nil {
		t.Fatal(raised, err)
	}
	if len(p.Decision.Reasons) != 2 || len(s.Decision.Reasons) != 1 || s.Decision.Reasons[0] != "read-only" || cap(s.Decision.Reasons) > 1 && s.Decision.Reasons[:2][1] != "" {
		t.Errorf("plan's reasons %q, the snapshot's %q", p.Decision.Reasons, s.Decision.Reasons)
	}
}
