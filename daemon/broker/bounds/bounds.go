package bounds

import (
	"slices"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
)

// Only open plans (planned, awaiting approval, approved: they may still
// run) count against plans.max_open, plans.max_open_bytes and
// sessions.max_plans; a plan that settles (it ran, or was denied, blocked
// or expired) joins its principal's finished plans, of which the newest
// plans.keep_finished are kept, as long as the principal's records in the
// journal stay within plans.max_journal_bytes. Older ones are forgotten:
// dropped from memory and, at the next compaction, from the journal; their
// receipts are the record of what happened. Closing a session expires its
// open plans (each with its receipt) and forgets its plans.

// Use is what one principal's plans hold. Guarded by the broker's mutex,
// except Journal (the journal's lock).
type Use struct {
	Open      int   // open plans
	OpenBytes int64 // their request bytes
	Journal   int64 // bytes of its plans' current journal records
	// finished are the ids of settled plans kept, oldest first; ids of
	// plans forgotten otherwise (their session closed) are skipped.
	finished []string
	kept     int // settled plans of finished still held
}

// Uses is each principal's Use, by domain.PrincipalKey.
type Uses map[string]*Use

// For is the Use of the principal key, made on first use.
func (m Uses) For(key string) *Use {
	u, ok := m[key]
	if !ok {
		u = &Use{}
		m[key] = u
	}
	return u
}

// Open counts the open plans of all principals.
func (m Uses) Open() (n int) {
	for _, u := range m {
		n += u.Open
	}
	return n
}

// Finish places a settled plan among the principal's finished plans.
func (u *Use) Finish(id string) {
	u.finished = append(u.finished, id)
	u.kept++
}

// Count counts a plan holding bytes into the principal's open plans
// (open) or out of them; it returns the change, 1 or -1, for the plan's
// session to count as well.
func (u *Use) Count(open bool, bytes int64) int {
	d := 1
	if !open {
		d = -1
	}
	u.Open += d
	u.OpenBytes += int64(d) * bytes
	return d
}

// Unkeep accounts for a finished plan forgotten.
func (u *Use) Unkeep() { u.kept-- }

// Plans is the broker's plans as Trim sees them.
type Plans interface {
	// Kept reports whether plan id is held and among its principal's
	// finished plans.
	Kept(id string) bool
	// Forget drops plan id, which calls Unkeep on its Use.
	Forget(id string)
}

// Trim forgets the principal's oldest finished plans beyond
// plans.keep_finished, and while journal (nil: there is no journal) says
// its records pass plans.max_journal_bytes.
func (u *Use) Trim(lim config.Plans, journal func() int64, plans Plans) {
	over := func() bool {
		if u.kept > lim.KeepFinished {
			return true
		}
		if journal == nil {
			return false
		}
		return journal() > lim.MaxJournalBytes
	}
	i := 0
	for i < len(u.finished) && u.kept > 0 && over() {
		id := u.finished[i]
		i++
		if plans.Kept(id) {
			plans.Forget(id)
		}
	}
	u.finished = u.finished[i:]
	// Ids of plans forgotten with their sessions stay in the list until
	// they reach its head: squeeze them out before they outnumber the kept.
	if len(u.finished) > 2*u.kept+64 {
		kept := u.finished[:0]
		for _, id := range u.finished {
			if plans.Kept(id) {
				kept = append(kept, id)
			}
		}
		u.finished = slices.Clip(kept)
	}
}

const todo = "execute them (`termctl execute ID`), have them approved or denied, or close sessions you no longer need (`termctl sessions close ID` expires their open plans); `termctl sessions list` shows your sessions"

// SessionRoom refuses a plan in session id, which holds open plans, at its
// cap sessions.max_plans (max).
func SessionRoom(id string, open, max int) error {
	if open >= max {
		return errdefs.Exhausted("session %s already holds %d open plans (planned, awaiting approval or approved), its cap sessions.max_plans (%d): execute or let them expire, close the session with `termctl sessions close %s` (its open plans expire), or plan in a new session", id, open, max, id)
	}
	return nil
}

// Room refuses a plan of reqBytes from who past plans.max_open or
// plans.max_open_bytes. Finished plans never count.
func (u *Use) Room(who string, lim config.Plans, reqBytes int64) error {
	if u.Open >= lim.MaxOpen {
		return errdefs.Exhausted("%s holds %d open plans (planned, awaiting approval or approved: not yet run), the limit plans.max_open (%d): %s, or ask an operator to raise plans.max_open", who, u.Open, lim.MaxOpen, todo)
	}
	if u.OpenBytes+reqBytes > lim.MaxOpenBytes {
		return errdefs.Exhausted("%s's open plans hold %s of requests and this one is %s, past the limit plans.max_open_bytes (%s): %s, or ask an operator to raise plans.max_open_bytes", who, domain.BytesWord(u.OpenBytes), domain.BytesWord(reqBytes), domain.BytesWord(lim.MaxOpenBytes), todo)
	}
	return nil
}

// JournalRoom refuses a plan from who, whose plans hold n bytes of the plan
// journal after trimming (so none of them is finished), past
// plans.max_journal_bytes.
func JournalRoom(who string, n int64, lim config.Plans) error {
	if n > lim.MaxJournalBytes {
		return errdefs.Exhausted("%s's plans hold %s of the plan journal, past the limit plans.max_journal_bytes (%s), and none of them is finished: %s, or ask an operator to raise plans.max_journal_bytes", who, domain.BytesWord(n), domain.BytesWord(lim.MaxJournalBytes), todo)
	}
	return nil
}

// Load reads a count the plan journal guards (journal.Journal.Load); nil
// when there is no journal.
type Load func(*int64) int64

// TrimFinished is Trim with u's journal bytes read through load.
func (u *Use) TrimFinished(lim config.Plans, load Load, plans Plans) {
	var journal func() int64
	if load != nil {
		journal = func() int64 { return load(&u.Journal) }
	}
	u.Trim(lim, journal, plans)
}

// Settled are the Uses whose plans settled under one hold of the broker's
// mutex, each once, in the order they first did.
type Settled []*Use

// Finish places settled plan id among the finished plans of u.
func (s *Settled) Finish(u *Use, id string) {
	u.Finish(id)
	if !slices.Contains(*s, u) {
		*s = append(*s, u)
	}
}

// Trim trims each principal's finished plans to the bounds (TrimFinished).
func (s Settled) Trim(lim config.Plans, load Load, plans Plans) {
	for _, u := range s {
		u.TrimFinished(lim, load, plans)
	}
}

// Ask is a new plan asking for room.
type Ask struct {
	Key, Who    string // its principal's key (domain.PrincipalKey) and name
	Session     string // its session
	SessionOpen int    // the open plans its session holds
	Bytes       int64  // what it holds: its request and stdin
}

// PlanRoom refuses a plan beyond the bounds on open plans: of its session
// (sessions.max_plans, maxPlans) and of its principal (plans.max_open,
// plans.max_open_bytes and, with a journal, plans.max_journal_bytes).
// Finished plans never count: the oldest are forgotten to make room.
func (m Uses) PlanRoom(a Ask, maxPlans int, lim config.Plans, load Load, plans Plans) error {
	if err := SessionRoom(a.Session, a.SessionOpen, maxPlans); err != nil {
		return err
	}
	u := m.For(a.Key)
	if err := u.Room(a.Who, lim, a.Bytes); err != nil {
		return err
	}
	if load == nil {
		return nil
	}
	u.TrimFinished(lim, load, plans)
	return JournalRoom(a.Who, load(&u.Journal), lim)
}
