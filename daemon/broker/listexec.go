package broker

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/termd/termd/daemon/broker/sessions"
	"github.com/termd/termd/daemon/runner"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// ListExecutions lists the executions the caller may see, newest first:
// the same visibility as plans and sessions (an agent sees its own sessions'
// executions; operators and viewers see every session's). Executions are
// held in memory, so the listing covers what ran since termd started; older
// ones are in the receipts. The rules are sessions.CheckList and Select.
func (b *Broker) ListExecutions(_ context.Context, caller *termdv1.Principal, r *termdv1.ListExecutionsRequest) ([]*termdv1.ListedExecution, error) {
	limit, err := sessions.CheckList(r)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.unlock()
	if r.SessionId != "" {
		if _, err := b.sessions.Get(caller, r.SessionId); err != nil {
			return nil, err
		}
	}
	found := sessions.Select(b.execs, func(e *execRec) sessions.Listed {
		return sessions.Listed{ID: e.id, SessionID: e.plan.session.ID, Owner: e.plan.session.Owner, State: e.e.State, Started: e.e.StartedAt.AsTime()}
	}, caller, r, limit)
	out := make([]*termdv1.ListedExecution, len(found))
	for i, e := range found {
		d := e.plan.p.GetDecision()
		out[i] = &termdv1.ListedExecution{
			Execution:    b.execSnapshotLocked(e),
			Argv:         slices.Clone(d.GetArgv()),
			Cwd:          d.GetCwd(),
			Requester:    proto.Clone(e.plan.p.GetRequester()).(*termdv1.Principal),
			SessionLabel: e.plan.session.Label,
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
