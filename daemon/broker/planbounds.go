package broker

import (
	"errors"
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/receiptstore"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Plans are bounded per principal (config plans.*, docs/OPERATIONS.md):
// only open plans (planned, awaiting approval, approved: they may still
// run) count against plans.max_open, plans.max_open_bytes and
// sessions.max_plans; a plan that settles (it ran, or was denied, blocked
// or expired) joins its principal's finished plans, of which the newest
// plans.keep_finished are kept, as long as the principal's records in the
// journal stay within plans.max_journal_bytes. Older ones are forgotten:
// dropped from memory and, at the next compaction, from the journal; their
// receipts are the record of what happened. Closing a session expires its
// open plans (each with its receipt) and forgets its plans.

// planUse is what one principal's plans hold. Guarded by Broker.mu, except
// journal (journal.fmu).
type planUse struct {
	open      int   // open plans
	openBytes int64 // their request bytes
	// finished are the ids of settled plans kept, oldest first; ids of
	// plans forgotten otherwise (their session closed) are skipped.
	finished []string
	kept     int   // settled plans of finished still held
	journal  int64 // bytes of its plans' current journal records
}

// isOpenState and isSettled are domain.PlanState's IsOpen and IsSettled for
// a plan state as the journal's records spell it.
func isOpenState(s termdv1.PlanState) bool { return domain.PlanStateOf(s).IsOpen() }

func isSettled(s termdv1.PlanState) bool { return domain.PlanStateOf(s).IsSettled() }

func (b *Broker) useLocked(key string) *planUse {
	u, ok := b.planUse[key]
	if !ok {
		u = &planUse{}
		b.planUse[key] = u
	}
	return u
}

// trackPlanLocked accounts for a plan's state after it changed (or was
// made or restored): its open counts, and, once settled, a place among its
// principal's finished plans (settleLocked, at unlock).
func (b *Broker) trackPlanLocked(p *planRec) {
	if open := p.state().IsOpen(); open != p.open {
		d := 1
		if !open {
			d = -1
		}
		p.open = open
		if !open {
			p.stdin = nil // it started (which took it) or settled
		}
		p.use.open += d
		p.use.openBytes += int64(d) * p.reqBytes
		p.session.open += d
	}
	if p.state().IsSettled() && !p.settled {
		p.settled = true
		b.settled = append(b.settled, p)
	}
}

// settleLocked places the plans settled under this hold of the mutex: a
// plan of a closed session is forgotten, others join their principal's
// finished plans, and the principals' finished plans are trimmed to the
// bounds. Called by unlock, so an operation that settled a plan completes
// before the plan can be forgotten.
func (b *Broker) settleLocked() {
	ps := b.settled
	b.settled = nil
	var touched []*planUse
	for _, p := range ps {
		if p.forgotten {
			continue
		}
		if p.session.closed {
			b.forgetPlanLocked(p)
			continue
		}
		u := p.use
		u.finished = append(u.finished, p.p.Id)
		u.kept++
		p.inFinished = true
		if !slices.Contains(touched, u) {
			touched = append(touched, u)
		}
	}
	for _, u := range touched {
		b.trimLocked(u)
	}
}

// trimLocked forgets a principal's oldest finished plans beyond
// plans.keep_finished, and while its journal records pass
// plans.max_journal_bytes.
func (b *Broker) trimLocked(u *planUse) {
	lim := b.Config().Plans
	j := b.journal
	over := func() bool {
		if u.kept > lim.KeepFinished {
			return true
		}
		if j == nil {
			return false
		}
		return j.Load(&u.journal) > lim.MaxJournalBytes
	}
	i := 0
	for i < len(u.finished) && u.kept > 0 && over() {
		p, ok := b.plans[u.finished[i]]
		i++
		if ok && p.inFinished {
			b.forgetPlanLocked(p)
		}
	}
	u.finished = u.finished[i:]
	// Ids of plans forgotten with their sessions stay in the list until
	// they reach its head: squeeze them out before they outnumber the kept.
	if len(u.finished) > 2*u.kept+64 {
		kept := u.finished[:0]
		for _, id := range u.finished {
			if p, ok := b.plans[id]; ok && p.inFinished {
				kept = append(kept, id)
			}
		}
		u.finished = slices.Clip(kept)
	}
}

// forgetPlanLocked drops a settled plan (and its finished execution) from
// memory; its journal record is dead from now on (gone at the next
// compaction) and its receipt stays.
func (b *Broker) forgetPlanLocked(p *planRec) {
	if p.forgotten {
		return
	}
	if p.open { // callers forget settled plans only; the counts stay exact anyway
		p.open = false
		p.use.open--
		p.use.openBytes -= p.reqBytes
		p.session.open--
	}
	delete(b.plans, p.p.Id)
	s := p.session
	if i := slices.Index(s.plans, p.p.Id); i >= 0 {
		s.plans = slices.Delete(s.plans, i, i+1)
	}
	if e, ok := b.execs[p.p.ExecutionId]; ok && e.plan == p && e.finished {
		delete(b.execs, e.id)
	}
	if p.inFinished {
		p.inFinished = false
		p.use.kept--
	}
	if j := b.journal; j != nil {
		j.Forget(&p.jbytes, &p.use.journal, &p.forgotten)
	} else {
		p.forgotten = true
	}
}

// restorePlanUseLocked accounts for a plan replayed from the journal.
func (b *Broker) restorePlanUseLocked(p *planRec) {
	p.who = domain.PrincipalKey(p.p.Requester)
	p.use = b.useLocked(p.who)
	p.reqBytes = int64(requestBytes(p.p.Request) + len(p.stdin))
	b.trackPlanLocked(p)
}

// settleRestoredLocked, at start, expires the open plans an older termd
// left in closed sessions (with their receipts) and applies the bounds to
// what was replayed.
func (b *Broker) settleRestoredLocked() {
	for _, s := range b.sessions {
		if s.closed {
			b.expireOpenPlansLocked(s, "its session had been closed")
		}
	}
	// Plans settled in the order they were made.
	slices.SortStableFunc(b.settled, func(x, y *planRec) int {
		return x.p.CreatedAt.AsTime().Compare(y.p.CreatedAt.AsTime())
	})
	b.settleLocked()
}

// expireOpenPlansLocked expires a closing session's open plans, each with
// its receipt.
func (b *Broker) expireOpenPlansLocked(s *session, why string) {
	for _, id := range slices.Clone(s.plans) {
		if p, ok := b.plans[id]; ok && p.open {
			b.expirePlanWhyLocked(p, why)
		}
	}
}

// planRoomLocked refuses a plan beyond the bounds on open plans: of the
// session (sessions.max_plans) and of the caller (plans.max_open,
// plans.max_open_bytes, plans.max_journal_bytes). Finished plans never
// count: the oldest are forgotten to make room.
func (b *Broker) planRoomLocked(caller *termdv1.Principal, s *session, reqBytes int64) error {
	cfg := b.Config()
	if max := cfg.Sessions.MaxPlans; s.open >= max {
		return errdefs.Exhausted("session %s already holds %d open plans (planned, awaiting approval or approved), its cap sessions.max_plans (%d): execute or let them expire, close the session with `termctl sessions close %s` (its open plans expire), or plan in a new session", s.id, s.open, max, s.id)
	}
	u := b.useLocked(domain.PrincipalKey(caller))
	lim := cfg.Plans
	const todo = "execute them (`termctl execute ID`), have them approved or denied, or close sessions you no longer need (`termctl sessions close ID` expires their open plans); `termctl sessions list` shows your sessions"
	if u.open >= lim.MaxOpen {
		return errdefs.Exhausted("%s holds %d open plans (planned, awaiting approval or approved: not yet run), the limit plans.max_open (%d): %s, or ask an operator to raise plans.max_open", caller.GetName(), u.open, lim.MaxOpen, todo)
	}
	if u.openBytes+reqBytes > lim.MaxOpenBytes {
		return errdefs.Exhausted("%s's open plans hold %s of requests and this one is %s, past the limit plans.max_open_bytes (%s): %s, or ask an operator to raise plans.max_open_bytes", caller.GetName(), domain.BytesWord(u.openBytes), domain.BytesWord(reqBytes), domain.BytesWord(lim.MaxOpenBytes), todo)
	}
	if j := b.journal; j != nil {
		b.trimLocked(u)
		n := j.Load(&u.journal)
		if n > lim.MaxJournalBytes {
			return errdefs.Exhausted("%s's plans hold %s of the plan journal, past the limit plans.max_journal_bytes (%s), and none of them is finished: %s, or ask an operator to raise plans.max_journal_bytes", caller.GetName(), domain.BytesWord(n), domain.BytesWord(lim.MaxJournalBytes), todo)
		}
	}
	return nil
}

// PlanStats counts the plans termd holds in memory and the open ones, for
// metrics.
func (b *Broker) PlanStats() (held, open int) {
	b.mu.Lock()
	defer b.unlock()
	for _, u := range b.planUse {
		open += u.open
	}
	return len(b.plans), open
}

// pastExecution is a finished execution termd no longer holds (its plan
// was forgotten, or termd restarted), as its receipt tells it, for a
// caller who may see that receipt; nil when there is none.
func (b *Broker) pastExecution(caller *termdv1.Principal, id string) (*termdv1.Execution, *receipt.Receipt, error) {
	if b.Store == nil || id == "" {
		return nil, nil, nil
	}
	r, err := b.Store.ByExecution(id)
	if errors.Is(err, receiptstore.ErrNotFound) || (err == nil && !domain.ReceiptVisible(caller, r)) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, errdefs.Internal("reading the receipt of execution %s: %v", id, err)
	}
	e := &termdv1.Execution{
		Id: id, PlanId: r.PlanID, SessionId: r.SessionID, ReceiptId: r.ID,
		State:       termdv1.ExecutionState_EXECUTION_STATE_OUTCOME_UNKNOWN,
		StartedAt:   timestamppb.New(r.StartedAt),
		FinishedAt:  timestamppb.New(r.FinishedAt),
		DurationMs:  r.DurationMs,
		Signal:      r.Signal,
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes,
		OutputTruncated: r.OutputTruncated,
		Error:           r.Detail,
	}
	if st, ok := domain.EndState(string(r.Status)); ok {
		e.State = st.Proto()
	}
	if r.ExitCode != nil {
		e.ExitCode = int32(*r.ExitCode)
	}
	if r.Sandbox != nil {
		e.NetworkIsolated = r.Sandbox.NetworkNamespace
	}
	return e, r, nil
}
