package broker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// The journal makes sessions, plans and approvals survive a crash: every
// change is appended before the caller is answered, and replayed at start.
// The latest record of each id wins. The file is compacted (rewritten with
// one record per live session, plan and grant) at start and, while termd
// runs, whenever superseded and forgotten records outweigh the live ones
// (compactJournalLocked), so it stays within about twice its live size.
//
// Records are written under the broker's mutex (so their order is the order
// of the changes) but never fsync'd there: a change that must be durable
// raises want, and the broker's unlock fsyncs up to it after releasing the
// mutex (one fsync serves every caller waiting at that moment). Records of an
// allowed plan, and of starts and ends, are lazy: the intent and the receipt
// in the receipt store are their durable word.
type journal struct {
	path    string
	written atomic.Int64 // bytes appended (a position that only grows, across compactions)
	want    atomic.Int64 // bytes that must be durable before the callers who wrote them are answered

	syncMu sync.Mutex
	synced atomic.Int64 // bytes known durable

	// fmu guards the file (a compaction swaps it), size, dead and the
	// jbytes of every session, plan and grant record; it is taken after
	// the broker's mutex, never before it.
	fmu  sync.Mutex
	f    *os.File
	size int64 // bytes in the current file
	dead int64 // bytes of records superseded by a later one or forgotten
	// compactions counts the rewrites while termd ran (not the one at start).
	compactions int
	// failedAt is when a compaction last failed (the next waits a minute).
	failedAt time.Time
}

// syncTo makes the first n bytes durable, unless an fsync already did.
func (j *journal) syncTo(n int64) error {
	if j.synced.Load() >= n {
		return nil
	}
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.synced.Load() >= n {
		return nil // another caller's fsync covered ours
	}
	j.fmu.Lock()
	f, w := j.f, j.written.Load()
	j.fmu.Unlock()
	if err := f.Sync(); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return nil // closed by closeJournal or replaced by a compaction, each synced first
		}
		return fmt.Errorf("syncing the plan journal: %w", err)
	}
	j.synced.Store(max(j.synced.Load(), w))
	return nil
}

// unlock releases the broker's mutex, then makes the journal records that
// must be durable so (see journal). Every b.mu.Lock pairs with it.
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
	return j.syncTo(j.want.Load())
}

type journalRecord struct {
	Kind    string          `json:"kind"` // "session", "plan" or "grant"
	Session json.RawMessage `json:"session,omitempty"`
	// Grant and GrantMatch are a grant and its pattern and binding (grants.go).
	Grant      json.RawMessage `json:"grant,omitempty"`
	GrantMatch json.RawMessage `json:"grant_match,omitempty"`
	Plan       json.RawMessage `json:"plan,omitempty"`
	Request    *policy.Request `json:"request,omitempty"`
	// Decision is what the plan was decided on (re-checked before it runs).
	Decision *policy.Decision `json:"decision,omitempty"`
	// Stdin is an open plan's standard input (planRec.stdin).
	Stdin []byte `json:"stdin,omitempty"`
}

// replayRecord is a journalRecord as replay reads it: a plan's request and
// decision are decoded only from its latest record.
type replayRecord struct {
	Kind       string          `json:"kind"`
	Session    json.RawMessage `json:"session,omitempty"`
	Grant      json.RawMessage `json:"grant,omitempty"`
	GrantMatch json.RawMessage `json:"grant_match,omitempty"`
	Plan       json.RawMessage `json:"plan,omitempty"`
	Request    json.RawMessage `json:"request,omitempty"`
	Decision   json.RawMessage `json:"decision,omitempty"`
	Stdin      json.RawMessage `json:"stdin,omitempty"`
}

var pjm = protojson.MarshalOptions{UseProtoNames: true}
var pju = protojson.UnmarshalOptions{DiscardUnknown: false}

// maxJournalRecord is the largest journal line replayed at start; requests
// are bounded far below it (plans.max_request_bytes), so a longer line is damage.
const maxJournalRecord = 64 << 20

// readRecord reads one line (without its newline). A line longer than max
// is consumed and reported as tooLong instead of being returned.
func readRecord(rd *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := rd.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), tooLong, err
	}
}

// keepClosed is how long closed sessions stay in the journal (their plans
// are forgotten when they close; their receipts stay).
const keepClosed = 7 * 24 * time.Hour

// openJournal replays the journal into the broker and compacts it.
func (b *Broker) openJournal(path string) error {
	sessions := map[string]*termdv1.Session{}
	var sessOrder []string
	plans := map[string]replayRecord{}
	var planOrder []string
	var replayed int64
	if f, err := os.Open(path); err == nil {
		if st, err := f.Stat(); err == nil {
			replayed = st.Size()
		}
		rd := bufio.NewReaderSize(f, 1<<20)
		line := 0
		var readErr error
		for {
			rec, tooLong, err := readRecord(rd, maxJournalRecord)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				if len(rec) == 0 && !tooLong {
					break
				}
			}
			line++
			if tooLong {
				// Never fatal: one oversized record must not keep termd from starting.
				b.Log.Warn("plan journal: skipping an oversized record", "file", path, "line", line, "limit_bytes", maxJournalRecord)
				if err != nil {
					break
				}
				continue
			}
			var r replayRecord
			if err := json.Unmarshal(rec, &r); err != nil {
				// A torn last line (crash mid-write) is expected; anything else is reported.
				b.Log.Warn("plan journal: skipping an unreadable record", "file", path, "line", line, "error", err)
				continue
			}
			switch r.Kind {
			case "session":
				s := &termdv1.Session{}
				if err := pju.Unmarshal(r.Session, s); err != nil {
					b.Log.Warn("plan journal: bad session record", "line", line, "error", err)
					continue
				}
				if _, ok := sessions[s.Id]; !ok {
					sessOrder = append(sessOrder, s.Id)
				}
				sessions[s.Id] = s
			case "plan":
				// Only the id now: the latest record of each plan is decoded below.
				id, err := planRecordID(r.Plan)
				if err != nil {
					b.Log.Warn("plan journal: bad plan record", "line", line, "error", err)
					continue
				}
				if _, ok := plans[id]; !ok {
					planOrder = append(planOrder, id)
				}
				plans[id] = r
			case grantJournalKindName:
				if err := b.restoreGrant(journalRecord{Kind: r.Kind, Grant: r.Grant, GrantMatch: r.GrantMatch}); err != nil {
					b.Log.Warn("plan journal: skipping a grant record", "line", line, "error", err)
				}
			}
			if err != nil {
				break
			}
		}
		f.Close()
		if readErr != nil {
			return fmt.Errorf("reading the plan journal %s: %w", path, readErr)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("opening the plan journal: %w", err)
	}

	now := b.Now()
	for _, id := range sessOrder {
		ps := sessions[id]
		if ps.Closed && now.Sub(ps.LastActiveAt.AsTime()) > keepClosed {
			continue
		}
		b.sessions[id] = &session{id: id, owner: ps.Owner, label: ps.Label, created: ps.CreatedAt.AsTime(), lastActive: now, closed: ps.Closed}
		if ps.Closed {
			b.Bus.CloseSession(id)
		} else {
			// Event sequence numbers restart with the daemon; the first event says so.
			s := b.sessions[id]
			b.Bus.Publish(id, termdv1.EventKind_EVENT_KIND_SESSION_CREATED, func(e *termdv1.Event) { e.Payload = &termdv1.Event_Session{Session: s.proto(b)} })
		}
	}
	ran := &ranIndex{b: b, bySes: map[string]map[string]*receipt.Receipt{}}
	for _, id := range planOrder {
		r := plans[id]
		delete(plans, id) // its raw record is garbage once decoded
		p := &termdv1.Plan{}
		if err := pju.Unmarshal(r.Plan, p); err != nil {
			b.Log.Warn("plan journal: bad plan record", "plan", id, "error", err)
			continue
		}
		s, ok := b.sessions[p.SessionId]
		if !ok || len(r.Request) == 0 || len(r.Decision) == 0 {
			continue
		}
		rec := &planRec{p: p, session: s}
		if err := errors.Join(json.Unmarshal(r.Request, &rec.req), json.Unmarshal(r.Decision, &rec.dec)); err != nil {
			b.Log.Warn("plan journal: bad plan record", "plan", id, "error", err)
			continue
		}
		b.settleRestoredPlan(p, ran)
		// An open plan's stdin (one that ran, as its receipt proves, needs none).
		if len(r.Stdin) > 0 && isOpenState(p.State) {
			if err := json.Unmarshal(r.Stdin, &rec.stdin); err != nil {
				b.Log.Warn("plan journal: bad stdin in a plan record; the plan is refused when it starts (plan the command again with its input)", "plan", id, "error", err)
			}
		}
		b.plans[id] = rec
		s.plans = append(s.plans, id)
		b.restorePlanUseLocked(rec)
	}
	// What an older termd left in closed sessions, and anything past the
	// plan bounds (which may have been lowered), goes now as it would have
	// while termd ran.
	b.settleRestoredLocked()

	b.journal = &journal{path: path}
	if err := b.compactJournalLocked(); err != nil {
		return err
	}
	if replayed >= 8<<20 {
		// Reading a large journal took memory the live state does not
		// need: hand it back now rather than when the runtime gets to it.
		plans = nil
		debug.FreeOSMemory()
	}
	return nil
}

// planRecordID is the id of a plan record's plan (valid JSON): read from
// its start, where termd writes it (planLine, tombstoneLine), without
// scanning the rest; decoded when it is elsewhere.
func planRecordID(plan json.RawMessage) (string, error) {
	const head = `{"id":"`
	if rest, ok := bytes.CutPrefix(plan, []byte(head)); ok {
		if i := bytes.IndexByte(rest, '"'); i > 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i]), nil
		}
	}
	var p struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(plan, &p); err != nil {
		return "", err
	}
	if p.ID == "" {
		return "", errors.New("the plan has no id")
	}
	return p.ID, nil
}

// compactJournalLocked rewrites the journal with one record per live
// session, plan and grant: into a new file, fsync'd, renamed over the old
// one, and the directory fsync'd, so a crash at any point leaves either the
// old journal or the new one, each whole. Called at start and by the sweep
// when dead records outweigh the live ones.
func (b *Broker) compactJournalLocked() error {
	j := b.journal
	j.fmu.Lock()
	defer j.fmu.Unlock()
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("compacting the plan journal: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("compacting the plan journal: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var size int64
	emit := func(line []byte, slot *int64) error {
		if _, err := w.Write(line); err != nil {
			return err
		}
		size += int64(len(line))
		*slot = int64(len(line))
		return nil
	}
	ss := make([]*session, 0, len(b.sessions))
	for _, s := range b.sessions {
		ss = append(ss, s)
	}
	sort.Slice(ss, func(i, k int) bool {
		if !ss[i].created.Equal(ss[k].created) {
			return ss[i].created.Before(ss[k].created)
		}
		return ss[i].id < ss[k].id
	})
	for _, s := range ss {
		line, err := b.sessionLine(s)
		if err == nil {
			err = emit(line, &s.jbytes)
		}
		if err != nil {
			return fail(err)
		}
	}
	for _, u := range b.planUse {
		u.journal = 0
	}
	// Each session's plans in the order they were made.
	for _, s := range ss {
		for _, id := range s.plans {
			p, ok := b.plans[id]
			if !ok {
				continue
			}
			line, err := planLine(p.p, p)
			if isSettled(p.p.State) || len(line) > keepEncodingsBelow {
				p.dropEncodings()
			}
			if err == nil {
				err = emit(line, &p.jbytes)
			}
			if err != nil {
				return fail(err)
			}
			p.use.journal += p.jbytes
		}
	}
	if err := b.compactGrantsLocked(emit); err != nil {
		return fail(err)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	b.stall("compact")
	if err := os.Rename(tmp, j.path); err != nil {
		return fail(err)
	}
	if d, err := os.Open(filepath.Dir(j.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	if j.f != nil {
		_ = j.f.Close()
		j.compactions++
	}
	j.f, j.size, j.dead = f, size, 0
	// Everything recorded so far is in the new file, durable.
	n := j.written.Load()
	j.synced.Store(n)
	j.want.Store(n)
	return nil
}

// compactMinDead is the dead bytes below which the journal is not
// rewritten while termd runs, however small its live part.
const compactMinDead = 4 << 20

// maybeCompactJournal rewrites the journal when its dead records (superseded
// or forgotten) outweigh its live ones and pass compactMinDead.
func (b *Broker) maybeCompactJournal() {
	b.mu.Lock()
	defer b.unlock()
	j := b.journal
	if j == nil {
		return
	}
	j.fmu.Lock()
	due := j.dead >= compactMinDead && j.dead > j.size-j.dead && time.Since(j.failedAt) > time.Minute
	j.fmu.Unlock()
	if !due {
		return
	}
	if err := b.compactJournalLocked(); err != nil {
		j.failedAt = time.Now() // under b.mu, as every compaction
		b.Log.Error("plan journal compaction failed; the journal keeps growing until it succeeds (tried again in a minute)", "error", err)
	}
}

// JournalStats is the plan journal's size, for status and metrics.
func (b *Broker) JournalStats() (size, dead int64, compactions int) {
	b.mu.Lock()
	defer b.unlock()
	j := b.journal
	if j == nil {
		return 0, 0, 0
	}
	j.fmu.Lock()
	defer j.fmu.Unlock()
	return j.size, j.dead, j.compactions
}

// journalAppend appends a record; sync=false leaves it to the next synced
// write (used where another durable record already covers a crash).
// Durable records are fsync'd by the caller's unlock, after the mutex.
// slot holds the size of the record's id's current record (see
// journalAppendLine).
func (b *Broker) journalAppend(r journalRecord, sync bool, slot *int64) error {
	if b.journal == nil {
		return nil
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return b.journalAppendLine(append(data, '\n'), sync, slot, nil, nil)
}

// journalAppendLine appends one encoded record, newline included. The
// record supersedes the one of the same id whose size *slot holds: that
// one becomes dead, and *slot (and *use, a principal's journal bytes) take
// the new size. A record of something forgotten (gone set) is not written.
func (b *Broker) journalAppendLine(data []byte, sync bool, slot, use *int64, gone *bool) error {
	j := b.journal
	j.fmu.Lock()
	defer j.fmu.Unlock()
	if gone != nil && *gone {
		return nil
	}
	if _, err := j.f.Write(data); err != nil {
		return fmt.Errorf("writing the plan journal: %w", err)
	}
	l := int64(len(data))
	j.size += l
	if slot != nil {
		j.dead += *slot
		if use != nil {
			*use += l - *slot
		}
		*slot = l
	}
	n := j.written.Add(l)
	if sync {
		j.want.Store(n)
	}
	return nil
}

// journalPlanLocked durably records a plan's current state.
func (b *Broker) journalPlanLocked(p *planRec) error { return b.journalPlan(p, true) }

func (b *Broker) journalPlan(p *planRec, sync bool) error {
	return b.journalPlanState(p.p, p, sync, tombstoned(p))
}

// tombstoned says whether a plan's next record is a tombstone: it settled
// in a closed session, so it is forgotten (planbounds.go). Called with the
// mutex held.
func tombstoned(p *planRec) bool { return p.session.closed && isSettled(p.p.State) }

// tombstoneLine is the record of a forgotten plan: its id, session, state
// and receipt, without the request and decision replay needs to restore a
// plan, so replay drops it. Its receipt is the durable word on it.
func tombstoneLine(pp *termdv1.Plan) ([]byte, error) {
	data, err := pjm.Marshal(&termdv1.Plan{Id: pp.Id, SessionId: pp.SessionId, State: pp.State, ReceiptId: pp.ReceiptId})
	if err != nil {
		return nil, err
	}
	line, err := json.Marshal(journalRecord{Kind: "plan", Plan: data})
	return append(line, '\n'), err
}

// journalPlanState records plan state pp of rec (pp is rec.p or a snapshot
// of it); tomb writes a tombstone instead (tombstoned).
func (b *Broker) journalPlanState(pp *termdv1.Plan, rec *planRec, sync, tomb bool) error {
	if b.journal == nil {
		return nil
	}
	var line []byte
	var err error
	if tomb {
		line, err = tombstoneLine(pp)
	} else {
		line, err = planLine(pp, rec)
	}
	if isSettled(pp.State) || len(line) > keepEncodingsBelow {
		rec.dropEncodings()
	}
	if err == nil {
		err = b.journalAppendLine(line, sync, &rec.jbytes, &rec.use.journal, &rec.forgotten)
	}
	if err != nil {
		b.Log.Error("plan journal write failed; this change would not survive a crash", "plan", pp.Id, "error", err)
	}
	return err
}

// planLine encodes a plan record as json.Marshal of journalRecord{Kind:
// "plan", Plan, Request, Decision} would, up to the order of the plan's
// fields and the spaces protojson writes: a plan gets three or more records
// (made, started, ended) and most of each never changes, so the request and
// decision are encoded once (rec.journalTail), the plan's own body is reused
// while it is unchanged (planJSON), and nothing is scanned again as a
// json.RawMessage would be. Encoding the records was ~5% of termd's CPU per
// execution.
func planLine(pp *termdv1.Plan, rec *planRec) ([]byte, error) {
	rec.bodyMu.Lock()
	tail := rec.journalTail
	if tail == nil {
		req, rerr := json.Marshal(&rec.req)
		dec, derr := json.Marshal(&rec.dec)
		if err := errors.Join(rerr, derr); err != nil {
			rec.bodyMu.Unlock()
			return nil, fmt.Errorf("encoding the request and decision of plan %s: %w", pp.Id, err)
		}
		t := append([]byte(`,"request":`), req...)
		tail = append(append(t, `,"decision":`...), dec...)
		rec.journalTail = tail
	}
	rec.bodyMu.Unlock()
	plan, err := rec.planJSON(pp)
	if err != nil {
		return nil, err
	}
	// An open plan's stdin goes with it until it runs (then the intent and
	// the receipt are the record, and the bytes are let go); written after
	// the decision, as json.Marshal of journalRecord would.
	var stdin []byte
	if isOpenState(pp.State) && rec.stdin != nil { // lazy records (not open) are written outside b.mu
		if stdin, err = json.Marshal(rec.stdin); err != nil {
			return nil, err
		}
	}
	line := make([]byte, 0, len(`{"kind":"plan","plan":`)+len(plan)+len(tail)+len(`,"stdin":`)+len(stdin)+2)
	line = append(append(line, `{"kind":"plan","plan":`...), plan...)
	line = append(line, tail...)
	if stdin != nil {
		line = append(append(line, `,"stdin":`...), stdin...)
	}
	return append(line, "}\n"...), nil
}

// keepEncodingsBelow is the record size above which a plan's encodings are
// not kept between its records (dropEncodings): for a large plan memory
// matters more than the encoding they save.
const keepEncodingsBelow = 64 << 10

// dropEncodings lets go of a plan's cached record encodings (planLine),
// several copies of its request: after a settled state's record (written
// again only by a compaction, which encodes it afresh), and after every
// record of a large plan.
func (rec *planRec) dropEncodings() {
	rec.bodyMu.Lock()
	rec.journalTail, rec.bodyBin, rec.bodyJSON = nil, nil, nil
	rec.bodyMu.Unlock()
}

// planJSON is the protojson of plan state pp of rec. Its message fields
// (request, decision, preview, limits, requester, approval, denial: set
// once or rarely) are encoded by protojson and kept from the last record,
// reused while their binary encoding (cheap to make) is the same, so a
// change to them (the adviser adds a reason) is never missed; the scalar
// fields and timestamps, which change from record to record, are written
// directly (restJSON; protojson took ~20 us per record for them) and the
// two objects joined.
func (rec *planRec) planJSON(pp *termdv1.Plan) ([]byte, error) {
	body := &termdv1.Plan{Request: pp.Request, Decision: pp.Decision, Preview: pp.Preview, Limits: pp.Limits,
		Requester: pp.Requester, Approval: pp.Approval, Denial: pp.Denial}
	bin, err := proto.MarshalOptions{Deterministic: true}.Marshal(body)
	if err != nil {
		return nil, err
	}
	rec.bodyMu.Lock()
	if rec.bodyJSON == nil || !bytes.Equal(bin, rec.bodyBin) {
		j, err := pjm.Marshal(body)
		if err != nil {
			rec.bodyMu.Unlock()
			return nil, err
		}
		rec.bodyBin, rec.bodyJSON = bin, bytes.TrimSpace(j)
	}
	bj := rec.bodyJSON
	rec.bodyMu.Unlock()
	rj, ok := restJSON(pp)
	if !ok {
		rest := proto.Clone(pp).(*termdv1.Plan)
		rest.Request, rest.Decision, rest.Preview, rest.Limits = nil, nil, nil, nil
		rest.Requester, rest.Approval, rest.Denial = nil, nil, nil
		j, err := pjm.Marshal(rest)
		if err != nil {
			return nil, err
		}
		rj = bytes.TrimSpace(j)
	}
	inner := func(obj []byte) []byte { return bytes.TrimSpace(obj[1 : len(obj)-1]) }
	switch {
	case len(inner(bj)) == 0:
		return rj, nil
	case len(inner(rj)) == 0:
		return bj, nil
	}
	out := make([]byte, 0, len(rj)+len(bj))
	out = append(append(out, rj[:len(rj)-1]...), ',')
	return append(out, bj[1:]...), nil
}

// restJSON is what protojson (proto names) writes for pp's scalar fields
// and timestamps, up to spaces; false when it would not know (a string
// that is not UTF-8, a timestamp out of range, an enum value without a
// name), for protojson to decide. TestPlanJSONEveryField holds it to
// protojson for every field of Plan, so a field added to Plan and not
// written here fails it.
func restJSON(pp *termdv1.Plan) ([]byte, bool) {
	out := make([]byte, 0, 512)
	out = append(out, '{')
	ok := true
	str := func(name, v string) {
		if v == "" {
			return
		}
		if !utf8.ValidString(v) {
			ok = false
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = appendJSONString(append(appendJSONString(out, name), ':'), v)
	}
	ts := func(name string, t *timestamppb.Timestamp) {
		if t == nil {
			return
		}
		// As protojson: RFC 3339 in UTC, 0, 3, 6 or 9 fractional digits.
		if t.Seconds < -62135596800 || t.Seconds > 253402300799 || t.Nanos < 0 || t.Nanos >= 1e9 {
			ok = false
			return
		}
		x := time.Unix(t.Seconds, int64(t.Nanos)).UTC().Format("2006-01-02T15:04:05.000000000")
		x = strings.TrimSuffix(x, "000")
		x = strings.TrimSuffix(x, "000")
		x = strings.TrimSuffix(x, "000")
		x = strings.TrimSuffix(x, ".")
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = appendJSONString(append(appendJSONString(out, name), ':'), x+"Z")
	}
	str("id", pp.Id)
	str("session_id", pp.SessionId)
	if pp.State != 0 {
		name, known := termdv1.PlanState_name[int32(pp.State)]
		if !known {
			return nil, false
		}
		str("state", name)
	}
	ts("created_at", pp.CreatedAt)
	ts("updated_at", pp.UpdatedAt)
	ts("expires_at", pp.ExpiresAt)
	str("execution_id", pp.ExecutionId)
	str("receipt_id", pp.ReceiptId)
	str("replanned_from", pp.ReplannedFrom)
	if pp.FlaggedByAdviser {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, `"flagged_by_adviser":true`...)
	}
	str("advice_digest", pp.AdviceDigest)
	str("next_step", pp.NextStep)
	str("grant_id", pp.GrantId)
	return append(out, '}'), ok
}

// appendJSONString appends s (valid UTF-8) as a JSON string.
func appendJSONString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	return append(append(out, s[start:]...), '"')
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
	snap := proto.Clone(p.p).(*termdv1.Plan)
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
		err = b.journalAppendLine(line, true, &s.jbytes, nil, nil)
	}
	if err != nil {
		b.Log.Error("plan journal write failed; this session would not survive a crash", "session", s.id, "error", err)
	}
	return err
}

// sessionLine is a session's journal record.
func (b *Broker) sessionLine(s *session) ([]byte, error) {
	ps := s.proto(b)
	ps.ActiveExecutionId = ""
	data, err := pjm.Marshal(proto.Message(ps))
	if err != nil {
		return nil, err
	}
	line, err := json.Marshal(journalRecord{Kind: "session", Session: data})
	return append(line, '\n'), err
}

func (b *Broker) closeJournal() {
	if j := b.journal; j != nil {
		j.fmu.Lock()
		_ = j.f.Sync()
		_ = j.f.Close()
		j.fmu.Unlock()
	}
}

// settleRestoredPlan fixes the state of a plan whose last journal record may
// predate its execution: the receipt store is the durable word on what ran.
// ranIndex maps plan ids to the receipts of their executions, per session, read
// once at start rather than once per restored plan.
type ranIndex struct {
	b     *Broker
	bySes map[string]map[string]*receipt.Receipt
}

func (x *ranIndex) receiptOf(sessionID, planID string) *receipt.Receipt {
	m, ok := x.bySes[sessionID]
	if !ok {
		m = map[string]*receipt.Receipt{}
		if rs, err := x.b.Store.List(receiptstore.Filter{SessionID: sessionID, Limit: -1}); err == nil {
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

func (b *Broker) settleRestoredPlan(p *termdv1.Plan, ran *ranIndex) {
	switch p.State {
	case termdv1.PlanState_PLAN_STATE_PLANNED, termdv1.PlanState_PLAN_STATE_APPROVED,
		termdv1.PlanState_PLAN_STATE_RUNNING, termdv1.PlanState_PLAN_STATE_PAUSED:
	default:
		return
	}
	if rid, ok := b.recovered[p.Id]; ok {
		restoreFinal(p, termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN, rid)
		return
	}
	if r := ran.receiptOf(p.SessionId, p.Id); r != nil {
		restoreFinal(p, planStateOf(r.Status), r.ID)
		return
	}
	if p.State == termdv1.PlanState_PLAN_STATE_RUNNING || p.State == termdv1.PlanState_PLAN_STATE_PAUSED {
		restoreFinal(p, termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN, p.ReceiptId)
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
