package journal

import (
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// KeepClosed is how long closed sessions stay in the journal (their plans
// are forgotten when they close; their receipts stay).
const KeepClosed = 7 * 24 * time.Hour

// LiveSessions are the replayed sessions to restore at now, in the order
// each first appeared: all but those closed longer than KeepClosed.
func (rp *Replayed) LiveSessions(now time.Time) []*termdv1.Session {
	out := make([]*termdv1.Session, 0, len(rp.SessionOrder))
	for _, id := range rp.SessionOrder {
		ps := rp.Sessions[id]
		if ps.Closed && now.Sub(ps.LastActiveAt.AsTime()) > KeepClosed {
			continue
		}
		out = append(out, ps)
	}
	return out
}

// RestoredPlan is a plan decoded from its latest record.
type RestoredPlan struct {
	Plan     *termdv1.Plan
	Request  policy.Request
	Decision policy.Decision
	// Stdin is an open plan's standard input (nil for one that ran).
	Stdin []byte
}

// Receipts is what restoring plans reads of the receipt store.
type Receipts interface {
	List(receiptstore.Filter) ([]*receipt.Receipt, error)
}

// Restorer restores the replayed plans (Plans) for the broker.
type Restorer struct {
	Log   *slog.Logger
	Store Receipts
	// Recovered maps plan ids to the outcome_unknown receipts written at
	// start for intents that had no receipt.
	Recovered map[string]string
	// HasSession says whether a session was restored (a plan of another
	// is not).
	HasSession func(id string) bool
	// Final settles a restored plan in a final state the receipt store
	// proves, with its receipt (the broker's state machine).
	Final func(p *termdv1.Plan, to termdv1.PlanState, receiptID string)
}

// Plans decodes the replayed plans of the restored sessions, in the order
// they were made, settles each in the state the receipt store proves
// (settle), and hands each to add. A plan record without its request and
// decision (a tombstone) is dropped; one that cannot be read is logged and
// skipped. Each plan's raw record is deleted from rp once decoded.
func (rs Restorer) Plans(rp *Replayed, add func(*RestoredPlan)) {
	ran := &ranIndex{store: rs.Store, bySes: map[string]map[string]*receipt.Receipt{}}
	for _, id := range rp.PlanOrder {
		r := rp.Plans[id]
		delete(rp.Plans, id) // its raw record is garbage once decoded
		p := &termdv1.Plan{}
		if err := pju.Unmarshal(r.Plan, p); err != nil {
			rs.Log.Warn("plan journal: bad plan record", "plan", id, "error", err)
			continue
		}
		if !rs.HasSession(p.SessionId) || len(r.Request) == 0 || len(r.Decision) == 0 {
			continue
		}
		rec := &RestoredPlan{Plan: p}
		if err := errors.Join(json.Unmarshal(r.Request, &rec.Request), json.Unmarshal(r.Decision, &rec.Decision)); err != nil {
			rs.Log.Warn("plan journal: bad plan record", "plan", id, "error", err)
			continue
		}
		rs.settle(p, ran)
		// An open plan's stdin (one that ran, as its receipt proves, needs none).
		if len(r.Stdin) > 0 && domain.PlanStateOf(p.State).IsOpen() {
			if err := json.Unmarshal(r.Stdin, &rec.Stdin); err != nil {
				rs.Log.Warn("plan journal: bad stdin in a plan record; the plan is refused when it starts (plan the command again with its input)", "plan", id, "error", err)
			}
		}
		add(rec)
	}
}

// ranIndex maps plan ids to the receipts of their executions, per session,
// read once at start rather than once per restored plan.
type ranIndex struct {
	store Receipts
	bySes map[string]map[string]*receipt.Receipt
}

func (x *ranIndex) receiptOf(sessionID, planID string) *receipt.Receipt {
	m, ok := x.bySes[sessionID]
	if !ok {
		m = map[string]*receipt.Receipt{}
		if rs, err := x.store.List(receiptstore.Filter{SessionID: sessionID, Limit: -1}); err == nil {
			for _, r := range rs {
				if r.ExecutionID != "" {
					m[r.PlanID] = r
				}
			}
		}
		x.bySes[sessionID] = m
	}
	return m[planID]
}

// settle fixes the state of a plan whose last journal record may predate
// its execution: the receipt store is the durable word on what ran.
func (rs Restorer) settle(p *termdv1.Plan, ran *ranIndex) {
	switch p.State {
	case termdv1.PlanState_PLAN_STATE_PLANNED, termdv1.PlanState_PLAN_STATE_APPROVED,
		termdv1.PlanState_PLAN_STATE_RUNNING, termdv1.PlanState_PLAN_STATE_PAUSED:
	default:
		return
	}
	if rid, ok := rs.Recovered[p.Id]; ok {
		rs.Final(p, termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN, rid)
		return
	}
	if r := ran.receiptOf(p.SessionId, p.Id); r != nil {
		rs.Final(p, planStateOf(r.Status), r.ID)
		return
	}
	if p.State == termdv1.PlanState_PLAN_STATE_RUNNING || p.State == termdv1.PlanState_PLAN_STATE_PAUSED {
		rs.Final(p, termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN, p.ReceiptId)
	}
}

// planStateOf maps a receipt's status to the plan's final state (the same
// table the live path uses; receipt and runner statuses share their words).
func planStateOf(s receipt.Status) termdv1.PlanState {
	if st, ok := domain.EndState(string(s)); ok {
		return st.PlanState().Proto()
	}
	return termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN
}
