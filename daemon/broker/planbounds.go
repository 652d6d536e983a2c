package broker

import (
	"slices"

	"github.com/termd/termd/daemon/broker/bounds"
	"github.com/termd/termd/daemon/broker/wire"
	"github.com/termd/termd/daemon/domain"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// The plan bounds per principal live in daemon/broker/bounds; here each
// plan takes and leaves its place in its principal's bounds.Use as its
// state changes, is forgotten, or is restored from the journal.

// isOpenState and isSettled are domain.PlanState's IsOpen and IsSettled for
// a plan state as the journal's records spell it.
func isOpenState(s termdv1.PlanState) bool { return domain.PlanStateOf(s).IsOpen() }

func isSettled(s termdv1.PlanState) bool { return domain.PlanStateOf(s).IsSettled() }

// trackPlanLocked accounts for a plan's state after it changed (or was
// made or restored): its open counts, and, once settled, a place among its
// principal's finished plans (settleLocked, at unlock).
func (b *Broker) trackPlanLocked(p *planRec) {
	if open := p.state().IsOpen(); open != p.open {
		p.open = open
		if !open {
			p.stdin = nil // it started (which took it) or settled
		}
		p.session.Open += p.use.Count(open, p.reqBytes)
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
	var touched bounds.Settled
	for _, p := range ps {
		if p.forgotten {
			continue
		}
		if p.session.Closed {
			b.forgetPlanLocked(p)
			continue
		}
		touched.Finish(p.use, p.p.Id)
		p.inFinished = true
	}
	touched.Trim(b.Config().Plans, b.journalLoad(), finishedPlans{b})
}

// journalLoad reads the counts the plan journal guards (nil: no journal).
func (b *Broker) journalLoad() bounds.Load {
	if j := b.journal; j != nil {
		return j.Load
	}
	return nil
}

// finishedPlans is the broker's plans as bounds.Use.Trim sees them.
type finishedPlans struct{ b *Broker }

func (f finishedPlans) Kept(id string) bool {
	p, ok := f.b.plans[id]
	return ok && p.inFinished
}

func (f finishedPlans) Forget(id string) { f.b.forgetPlanLocked(f.b.plans[id]) }

// forgetPlanLocked drops a settled plan (and its finished execution) from
// memory; its journal record is dead from now on (gone at the next
// compaction) and its receipt stays.
func (b *Broker) forgetPlanLocked(p *planRec) {
	if p.forgotten {
		return
	}
	if p.open { // callers forget settled plans only; the counts stay exact anyway
		p.open = false
		p.session.Open += p.use.Count(false, p.reqBytes)
	}
	delete(b.plans, p.p.Id)
	s := p.session
	if i := slices.Index(s.Plans, p.p.Id); i >= 0 {
		s.Plans = slices.Delete(s.Plans, i, i+1)
	}
	if e, ok := b.execs[p.p.ExecutionId]; ok && e.plan == p && e.finished {
		delete(b.execs, e.id)
	}
	if p.inFinished {
		p.inFinished = false
		p.use.Unkeep()
	}
	if j := b.journal; j != nil {
		j.Forget(&p.jbytes, &p.use.Journal, &p.forgotten)
	} else {
		p.forgotten = true
	}
}

// restorePlanUseLocked accounts for a plan replayed from the journal.
func (b *Broker) restorePlanUseLocked(p *planRec) {
	p.who = domain.PrincipalKey(p.p.Requester)
	p.use = b.planUse.For(p.who)
	p.reqBytes = int64(wire.RequestBytes(p.p.Request) + len(p.stdin))
	b.trackPlanLocked(p)
}

// settleRestoredLocked, at start, expires the open plans an older termd
// left in closed sessions (with their receipts) and applies the bounds to
// what was replayed.
func (b *Broker) settleRestoredLocked() {
	for _, s := range b.sessions {
		if s.Closed {
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
	for _, id := range slices.Clone(s.Plans) {
		if p, ok := b.plans[id]; ok && p.open {
			b.expirePlanWhyLocked(p, why)
		}
	}
}

// planRoomLocked refuses a plan beyond the bounds on open plans
// (bounds.PlanRoom); finished plans are forgotten to make room.
func (b *Broker) planRoomLocked(caller *termdv1.Principal, s *session, reqBytes int64) error {
	cfg := b.Config()
	return b.planUse.PlanRoom(bounds.Ask{Key: domain.PrincipalKey(caller), Who: caller.GetName(), Session: s.ID, SessionOpen: s.Open, Bytes: reqBytes},
		cfg.Sessions.MaxPlans, cfg.Plans, b.journalLoad(), finishedPlans{b})
}

// PlanStats counts the plans termd holds in memory and the open ones, for
// metrics.
func (b *Broker) PlanStats() (held, open int) {
	b.mu.Lock()
	defer b.unlock()
	return len(b.plans), b.planUse.Open()
}

// pastExecution is a finished execution termd no longer holds (its plan
// was forgotten, or termd restarted), as its receipt tells it, for a
// caller who may see that receipt; nil when there is none.
func (b *Broker) pastExecution(caller *termdv1.Principal, id string) (*termdv1.Execution, *receipt.Receipt, error) {
	r, err := b.receipts.OfExecution(caller, id)
	if r == nil || err != nil {
		return nil, nil, err
	}
	return wire.ExecutionOfReceipt(id, r), r, nil
}
