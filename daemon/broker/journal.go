package broker

import (
	"runtime/debug"

	"github.com/termd/termd/daemon/broker/journal"
	"github.com/termd/termd/daemon/broker/plans"
	"github.com/termd/termd/daemon/broker/sessions"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The plan journal (daemon/broker/journal) makes sessions, plans and
// grants survive a crash. The broker writes a record of every change under
// its mutex, and fsyncs the durable ones after releasing it (unlock); at
// start it restores what the journal holds (openJournal) and compacts it,
// and again while it runs when dead records outweigh the live ones
// (maybeCompactJournal). Every size the journal keeps for the broker
// (session, plan and grant jbytes, bounds.Use.Journal, planRec.forgotten) is
// guarded by the journal's lock, taken after the broker's mutex.

// journalRecord is a record of the journal (grants.go builds them).
type journalRecord = journal.Record

// unlock releases the broker's mutex, then makes the journal records that
// must be durable so (see journal.Journal). Every b.mu.Lock pairs with it.
func (b *Broker) unlock() {
	if err := b.unlockDurable(); err != nil {
		b.Log.Error("plan journal sync failed; recent changes would not survive a crash", "error", err)
	}
}

// unlockDurable is unlock for callers that report a failed sync.
func (b *Broker) unlockDurable() error {
	if len(b.settled) > 0 {
		b.settleLocked()
	}
	j := b.journal
	b.mu.Unlock()
	if j == nil {
		return nil
	}
	return j.Sync()
}

// openJournal replays the journal into the broker and compacts it.
func (b *Broker) openJournal(path string) error {
	rp, err := journal.Replay(path, b.Log, b.restoreGrant)
	if err != nil {
		return err
	}
	b.restoreSessions(rp)
	b.restorePlans(rp)
	// What an older termd left in closed sessions, and anything past the
	// plan bounds (which may have been lowered), goes now as it would have
	// while termd ran.
	b.settleRestoredLocked()

	b.journal = journal.New(path)
	b.journal.Stall = b.stall
	if err := b.compactJournalLocked(); err != nil {
		return err
	}
	if rp.Bytes >= 8<<20 {
		// Reading a large journal took memory the live state does not
		// need: hand it back now rather than when the runtime gets to it.
		rp = nil
		debug.FreeOSMemory()
	}
	return nil
}

// restoreSessions restores the replayed sessions (journal.Replayed.LiveSessions).
func (b *Broker) restoreSessions(rp *journal.Replayed) {
	now := b.Now()
	for _, ps := range rp.LiveSessions(now) {
		id := ps.Id
		b.sessions[id] = sessions.Restore[*execRec](ps, now)
		if ps.Closed {
			b.Bus.CloseSession(id)
		} else {
			// Event sequence numbers restart with the daemon; the first event says so.
			s := b.sessions[id]
			b.Bus.Publish(id, termdv1.EventKind_EVENT_KIND_SESSION_CREATED, func(e *termdv1.Event) { e.Payload = &termdv1.Event_Session{Session: b.sessionProto(s)} })
		}
	}
}

// restorePlans restores the replayed plans of the restored sessions, each
// settled in the state the receipt store proves (journal.Restorer).
func (b *Broker) restorePlans(rp *journal.Replayed) {
	rs := journal.Restorer{Log: b.Log, Store: b.Store, Recovered: b.recovered, Final: restoreFinal,
		HasSession: func(id string) bool { _, ok := b.sessions[id]; return ok }}
	rs.Plans(rp, func(r *journal.RestoredPlan) {
		s := b.sessions[r.Plan.SessionId]
		rec := &planRec{p: r.Plan, req: r.Request, dec: r.Decision, stdin: r.Stdin, session: s}
		b.plans[r.Plan.Id] = rec
		s.Plans = append(s.Plans, r.Plan.Id)
		b.restorePlanUseLocked(rec)
	})
}

// compactJournalLocked rewrites the journal with one record per live
// session, plan and grant (journal.Journal.Compact). Called at start and by
// the sweep when dead records outweigh the live ones.
func (b *Broker) compactJournalLocked() error {
	return b.journal.Compact(func(emit journal.Emit) error {
		ss := b.sessions.ByCreation()
		for _, s := range ss {
			line, err := b.sessionLine(s)
			if err == nil {
				err = emit(line, &s.JBytes)
			}
			if err != nil {
				return err
			}
		}
		for _, u := range b.planUse {
			u.Journal = 0
		}
		// Each session's plans in the order they were made.
		for _, s := range ss {
			for _, id := range s.Plans {
				p, ok := b.plans[id]
				if !ok {
					continue
				}
				line, err := p.enc.Record(p.p, &p.req, &p.dec, &p.stdin, false)
				if err == nil {
					err = emit(line, &p.jbytes)
				}
				if err != nil {
					return err
				}
				p.use.Journal += p.jbytes
			}
		}
		return b.compactGrantsLocked(emit)
	})
}

// maybeCompactJournal compacts the journal when it is due (journal.Journal.Due).
func (b *Broker) maybeCompactJournal() {
	b.mu.Lock()
	defer b.unlock()
	j := b.journal
	if j == nil || !j.Due() {
		return
	}
	if err := b.compactJournalLocked(); err != nil {
		j.CompactFailed()
		b.Log.Error("plan journal compaction failed; the journal keeps growing until it succeeds (tried again in a minute)", "error", err)
	}
}

// JournalStats is the plan journal's size, for status and metrics.
func (b *Broker) JournalStats() (size, dead int64, compactions int) {
	b.mu.Lock()
	defer b.unlock()
	if b.journal == nil {
		return 0, 0, 0
	}
	return b.journal.Stats()
}

// journalAppend appends a record; sync=false leaves it to the next synced
// write (used where another durable record already covers a crash).
// Durable records are fsync'd by the caller's unlock, after the mutex.
// slot holds the size of the record's id's current record (see
// journal.Journal.Append).
func (b *Broker) journalAppend(r journalRecord, sync bool, slot *int64) error {
	if b.journal == nil {
		return nil
	}
	return b.journal.AppendRecord(r, sync, slot)
}

// journalPlanLocked durably records a plan's current state.
func (b *Broker) journalPlanLocked(p *planRec) error { return b.journalPlan(p, true) }

func (b *Broker) journalPlan(p *planRec, sync bool) error {
	return b.journalPlanState(p.p, p, sync, tombstoned(p))
}

// tombstoned says whether a plan's next record is a tombstone: it settled
// in a closed session, so it is forgotten (planbounds.go). Called with the
// mutex held.
func tombstoned(p *planRec) bool { return p.session.Closed && isSettled(p.p.State) }

// journalPlanState records plan state pp of rec (pp is rec.p or a snapshot
// of it); tomb writes a tombstone instead (tombstoned).
func (b *Broker) journalPlanState(pp *termdv1.Plan, rec *planRec, sync, tomb bool) error {
	if b.journal == nil {
		return nil
	}
	line, err := rec.enc.Record(pp, &rec.req, &rec.dec, &rec.stdin, tomb)
	if err == nil {
		err = b.journal.Append(line, sync, &rec.jbytes, &rec.use.Journal, &rec.forgotten)
		journal.Release(line)
	}
	if err != nil {
		b.Log.Error("plan journal write failed; this change would not survive a crash", "plan", pp.Id, "error", err)
	}
	return err
}

// journalPlanAfter, called with the mutex held, takes a plan's state at the
// start or end of an execution, which the receipt store already makes
// durable (the intent, the receipt), and returns the lazy write of its
// record, to be called after the mutex is released: encoding it held every
// session up. One write of the journal file is atomic; the start's record
// is written by the starting goroutine before the plan can change again,
// and a final state is a plan's last record, so no later record of the plan
// lands before either (replay settles a plan from the intent or receipt
// when one is lost). Not for a record that must be durable.
func (b *Broker) journalPlanAfter(p *planRec) func() {
	if b.journal == nil {
		return func() {}
	}
	snap := plans.Snapshot(p.p)
	tomb := tombstoned(p)
	return func() { _ = b.journalPlanState(snap, p, false, tomb) }
}

// journalSessionLocked durably records a session.
func (b *Broker) journalSessionLocked(s *session) error {
	if b.journal == nil {
		return nil
	}
	line, err := b.sessionLine(s)
	if err == nil {
		err = b.journal.Append(line, true, &s.JBytes, nil, nil)
	}
	if err != nil {
		b.Log.Error("plan journal write failed; this session would not survive a crash", "session", s.ID, "error", err)
	}
	return err
}

// sessionLine is a session's journal record.
func (b *Broker) sessionLine(s *session) ([]byte, error) {
	ps := b.sessionProto(s)
	ps.ActiveExecutionId = ""
	return journal.SessionLine(ps)
}

func (b *Broker) closeJournal() {
	if j := b.journal; j != nil {
		j.Close()
	}
}
