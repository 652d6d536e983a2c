package broker

import (
	"context"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/runner"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Listing bounds for ListExecutions.
const (
	listExecutionsDefault = 100
	listExecutionsMax     = 1000
)

// ListExecutions lists the executions the caller may see, newest first:
// the same visibility as plans and sessions (an agent sees its own sessions'
// executions; operators and viewers see every session's). Executions are
// held in memory, so the listing covers what ran since termd started; older
// ones are in the receipts.
func (b *Broker) ListExecutions(_ context.Context, caller *termdv1.Principal, r *termdv1.ListExecutionsRequest) ([]*termdv1.ListedExecution, error) {
	if r.Limit < 0 {
		return nil, errdefs.Invalid("limit %d is negative; omit it for %d, or give at most %d", r.Limit, listExecutionsDefault, listExecutionsMax)
	}
	for _, st := range r.States {
		if _, ok := termdv1.ExecutionState_name[int32(st)]; !ok || st == termdv1.ExecutionState_EXECUTION_STATE_UNSPECIFIED {
			return nil, errdefs.Invalid("state %d is not an execution state; use running, paused, succeeded, failed, timed_out, cancelled, killed, outcome_unknown or output_limit", st)
		}
	}
	limit := int(r.Limit)
	if limit == 0 {
		limit = listExecutionsDefault
	}
	limit = min(limit, listExecutionsMax)
	b.mu.Lock()
	defer b.unlock()
	if r.SessionId != "" {
		if _, err := b.sessionLocked(caller, r.SessionId); err != nil {
			return nil, err
		}
	}
	var found []*execRec
	for _, e := range b.execs {
		s := e.plan.session
		if !domain.Visible(caller, s.owner) || (r.SessionId != "" && s.id != r.SessionId) {
			continue
		}
		if len(r.States) > 0 && !slices.Contains(r.States, e.e.State) {
			continue
		}
		found = append(found, e)
	}
	sort.Slice(found, func(i, j int) bool {
		ti, tj := found[i].e.StartedAt.AsTime(), found[j].e.StartedAt.AsTime()
		if ti.Equal(tj) {
			return found[i].id > found[j].id
		}
		return ti.After(tj)
	})
	if len(found) > limit {
		found = found[:limit]
	}
	out := make([]*termdv1.ListedExecution, len(found))
	for i, e := range found {
		d := e.plan.p.GetDecision()
		out[i] = &termdv1.ListedExecution{
			Execution:    b.execSnapshotLocked(e),
			Argv:         slices.Clone(d.GetArgv()),
			Cwd:          d.GetCwd(),
			Requester:    proto.Clone(e.plan.p.GetRequester()).(*termdv1.Principal),
			SessionLabel: e.plan.session.label,
		}
	}
	return out, nil
}

// execSnapshotLocked is a copy of an execution's status; while it runs,
// with the byte counts so far, as the output already read shows, and its
// terminal's state (size, input holder, watchers) for a PTY execution.
func (b *Broker) execSnapshotLocked(e *execRec) *termdv1.Execution {
	out := proto.Clone(e.e).(*termdv1.Execution)
	e.hub.Fill(out)
	if e.proc != nil && !e.finished {
		_, out.StdoutBytes, _ = e.proc.ReadOutput(runner.Stdout, 0, 0)
		_, out.StderrBytes, _ = e.proc.ReadOutput(runner.Stderr, 0, 0)
	}
	return out
}
