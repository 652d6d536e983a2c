package journal

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// A closed session stays in the journal for KeepClosed after it was last
// active; open sessions stay however old, in the order they first appeared.
func TestLiveSessions(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-ago)) }
	rp := &Replayed{Sessions: map[string]*termdv1.Session{
		"old-open":      {Id: "old-open", LastActiveAt: at(30 * 24 * time.Hour)},
		"closed-recent": {Id: "closed-recent", Closed: true, LastActiveAt: at(KeepClosed - time.Minute)},
		"closed-old":    {Id: "closed-old", Closed: true, LastActiveAt: at(KeepClosed + time.Minute)},
		"new":           {Id: "new", LastActiveAt: at(0)},
	}, SessionOrder: []string{"new", "closed-old", "old-open", "closed-recent"}}
	var got []string
	for _, s := range rp.LiveSessions(now) {
		got = append(got, s.Id)
	}
	if want := []string{"new", "old-open", "closed-recent"}; !slices.Equal(got, want) {
		t.Fatalf("live sessions %v, want %v", got, want)
	}
}

// A restored plan settles in the final state its receipt's status names;
// a status termd does not know settles it as outcome_unknown.
func TestPlanStateOfReceiptStatus(t *testing.T) {
	for status, want := range map[receipt.Status]termdv1.PlanState{
		receipt.StatusSucceeded:      termdv1.PlanState_PLAN_STATE_SUCCEEDED,
		receipt.StatusFailed:         termdv1.PlanState_PLAN_STATE_FAILED,
		receipt.StatusTimedOut:       termdv1.PlanState_PLAN_STATE_TIMED_OUT,
		receipt.StatusCancelled:      termdv1.PlanState_PLAN_STATE_CANCELLED,
		receipt.StatusKilled:         termdv1.PlanState_PLAN_STATE_KILLED,
		receipt.StatusOutputLimit:    termdv1.PlanState_PLAN_STATE_OUTPUT_LIMIT,
		receipt.StatusOutcomeUnknown: termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN,
		"no-such-status":             termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN,
	} {
		if got := planStateOf(status); got != want {
			t.Errorf("planStateOf(%q) = %v, want %v", status, got, want)
		}
	}
}
