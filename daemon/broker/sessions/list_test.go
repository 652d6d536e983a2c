package sessions

import (
	"slices"
	"testing"
	"time"

	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// CheckList refuses a negative limit and a state that is no execution
// state, and bounds the limit.
func TestCheckList(t *testing.T) {
	for _, c := range []struct {
		limit int32
		want  int
	}{{0, ListDefault}, {5, 5}, {ListMax + 1, ListMax}} {
		if got, err := CheckList(&termdv1.ListExecutionsRequest{Limit: c.limit}); err != nil || got != c.want {
			t.Errorf("limit %d: %d (%v), want %d", c.limit, got, err, c.want)
		}
	}
	_, err := CheckList(&termdv1.ListExecutionsRequest{Limit: -1})
	wantKind(t, err, errdefs.KindInvalid, "limit -1", "at most 1000")
	_, err = CheckList(&termdv1.ListExecutionsRequest{States: []termdv1.ExecutionState{termdv1.ExecutionState_EXECUTION_STATE_RUNNING, 42}})
	wantKind(t, err, errdefs.KindInvalid, "state 42", "running")
	_, err = CheckList(&termdv1.ListExecutionsRequest{States: []termdv1.ExecutionState{termdv1.ExecutionState_EXECUTION_STATE_UNSPECIFIED}})
	wantKind(t, err, errdefs.KindInvalid, "state 0")
}

// Select lists what the caller may see, of the session and states asked
// for, newest first (by id when started together), at most limit.
func TestSelect(t *testing.T) {
	running, done := termdv1.ExecutionState_EXECUTION_STATE_RUNNING, termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED
	all := map[string]Listed{
		"e1": {ID: "e1", SessionID: "s1", Owner: agent, State: done, Started: t0},
		"e2": {ID: "e2", SessionID: "s1", Owner: agent, State: running, Started: t0.Add(time.Second)},
		"e3": {ID: "e3", SessionID: "s2", Owner: agent, State: done, Started: t0.Add(time.Second)},
		"e4": {ID: "e4", SessionID: "s3", Owner: other, State: running, Started: t0.Add(time.Hour)},
	}
	view := func(l Listed) Listed { return l }
	ids := func(caller *termdv1.Principal, r *termdv1.ListExecutionsRequest, limit int) []string {
		var out []string
		for _, l := range Select(all, view, caller, r, limit) {
			out = append(out, l.ID)
		}
		return out
	}
	for _, c := range []struct {
		name   string
		caller *termdv1.Principal
		r      *termdv1.ListExecutionsRequest
		limit  int
		want   []string
	}{
		{"an agent sees its own, newest first, ties by id", agent, &termdv1.ListExecutionsRequest{}, 10, []string{"e3", "e2", "e1"}},
		{"an operator sees all", operator, &termdv1.ListExecutionsRequest{}, 10, []string{"e4", "e3", "e2", "e1"}},
		{"a viewer sees all, up to the limit", viewer, &termdv1.ListExecutionsRequest{}, 2, []string{"e4", "e3"}},
		{"one session", operator, &termdv1.ListExecutionsRequest{SessionId: "s1"}, 10, []string{"e2", "e1"}},
		{"running ones", agent, &termdv1.ListExecutionsRequest{States: []termdv1.ExecutionState{running}}, 10, []string{"e2"}},
		{"another's session shows nothing", agent, &termdv1.ListExecutionsRequest{SessionId: "s3"}, 10, nil},
	} {
		if got := ids(c.caller, c.r, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
