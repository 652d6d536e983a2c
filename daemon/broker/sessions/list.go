package sessions

import (
	"slices"
	"sort"
	"time"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Listing bounds for ListExecutions.
const (
	ListDefault = 100
	ListMax     = 1000
)

// CheckList checks a ListExecutions request's limit and states and returns
// how many executions to list at most.
func CheckList(r *termdv1.ListExecutionsRequest) (limit int, err error) {
	if r.Limit < 0 {
		return 0, errdefs.Invalid("limit %d is negative; omit it for %d, or give at most %d", r.Limit, ListDefault, ListMax)
	}
	for _, st := range r.States {
		if _, ok := termdv1.ExecutionState_name[int32(st)]; !ok || st == termdv1.ExecutionState_EXECUTION_STATE_UNSPECIFIED {
			return 0, errdefs.Invalid("state %d is not an execution state; use running, paused, succeeded, failed, timed_out, cancelled, killed, outcome_unknown or output_limit", st)
		}
	}
	limit = int(r.Limit)
	if limit == 0 {
		limit = ListDefault
	}
	return min(limit, ListMax), nil
}

// Listed is what the listing needs of an execution.
type Listed struct {
	ID, SessionID string
	Owner         *termdv1.Principal // its session's owner
	State         termdv1.ExecutionState
	Started       time.Time
}

// Select picks the executions r lists for the caller, newest first (by id
// when started at the same time), at most limit: those of sessions the
// caller may see (an agent its own, operators and viewers every one), of
// r's session if named, in one of r's states if any are named. view says
// what the listing needs of each.
func Select[E any](all map[string]E, view func(E) Listed, caller *termdv1.Principal, r *termdv1.ListExecutionsRequest, limit int) []E {
	type row struct {
		e E
		l Listed
	}
	var found []row
	for _, e := range all {
		l := view(e)
		if !domain.Visible(caller, l.Owner) || (r.SessionId != "" && l.SessionID != r.SessionId) {
			continue
		}
		if len(r.States) > 0 && !slices.Contains(r.States, l.State) {
			continue
		}
		found = append(found, row{e, l})
	}
	sort.Slice(found, func(i, j int) bool {
		ti, tj := found[i].l.Started, found[j].l.Started
		if ti.Equal(tj) {
			return found[i].l.ID > found[j].l.ID
		}
		return ti.After(tj)
	})
	out := make([]E, min(len(found), limit))
	for i := range out {
		out[i] = found[i].e
	}
	return out
}
