package journal

import (
	"encoding/base64"
	"sync"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// PlanEncoding keeps, between a plan's records, the part of its record
// that never changes: its request and decision, encoded once (see
// PlanLine). Its zero value is ready; the broker keeps one per plan.
type PlanEncoding struct {
	mu sync.Mutex
	// tail is the end of the plan's records (its request and decision).
	tail []byte
	// size is the length of the plan's last record, to allocate the next.
	size int
}

// PlanLine encodes a plan record (plan state pp, decided on req and dec,
// with stdin, an open plan's standard input, or nil) as json.Marshal of
// Record{Kind: "plan", Plan, Request, Decision, Stdin} would, up to the
// order of the plan's fields and map entries: a plan gets three or more
// records (made, started, ended) whose request and decision never change,
// so they are encoded once, and the plan itself is written directly
// (AppendPlan), never scanned again as a json.RawMessage would be.
// Encoding the records was ~5% of termd's CPU per execution.
func (e *PlanEncoding) PlanLine(pp *termdv1.Plan, req *policy.Request, dec *policy.Decision, stdin []byte) ([]byte, error) {
	e.mu.Lock()
	tail, size := e.tail, e.size
	if tail == nil {
		tail = appendRequest(append(make([]byte, 0, 2048), `,"request":`...), req)
		tail = appendDecision(append(tail, `,"decision":`...), dec)
		e.tail = tail
	}
	e.mu.Unlock()
	// An open plan's stdin goes with it until it runs (then the intent and
	// the receipt are the record, and the bytes are let go); written after
	// the decision, base64 as json.Marshal of Record writes it.
	in := base64.StdEncoding.EncodedLen(len(stdin))
	line := lineBuffer(max(size, 1024+len(tail)+in+len(pp.GetRequest().GetStdin())*4/3))
	line, err := AppendPlan(append(line, `{"kind":"plan","plan":`...), pp)
	if err != nil {
		return nil, err
	}
	line = append(line, tail...)
	if stdin != nil {
		line = append(base64.StdEncoding.AppendEncode(append(line, `,"stdin":"`...), stdin), '"')
	}
	line = append(line, "}\n"...)
	e.mu.Lock()
	e.size = len(line)
	e.mu.Unlock()
	return line, nil
}

// Record is the record of plan state pp (decided on req and dec): a
// tombstone when tomb (TombstoneLine), else its PlanLine, with *stdin while
// pp is open (*stdin is read only then: the record of a plan that is not
// open may be written without the broker's mutex). The kept encodings are
// let go (Drop) after a settled state's record and after a large one.
func (e *PlanEncoding) Record(pp *termdv1.Plan, req *policy.Request, dec *policy.Decision, stdin *[]byte, tomb bool) ([]byte, error) {
	var line []byte
	var err error
	st := domain.PlanStateOf(pp.State)
	if tomb {
		line, err = TombstoneLine(pp)
	} else {
		var in []byte
		if st.IsOpen() {
			in = *stdin
		}
		line, err = e.PlanLine(pp, req, dec, in)
	}
	if st.IsSettled() || len(line) > keepEncodingsBelow {
		e.Drop()
	}
	return line, err
}

// keepEncodingsBelow is the record size above which a plan's encodings are
// not kept between its records (Drop): for a large plan memory matters more
// than the encoding they save.
const keepEncodingsBelow = 64 << 10

// Drop lets go of a plan's kept encodings, its request and decision:
// after a settled state's record (written again only by a compaction,
// which encodes it afresh), and after every record of a large plan.
func (e *PlanEncoding) Drop() {
	e.mu.Lock()
	e.tail, e.size = nil, 0
	e.mu.Unlock()
}

// lines holds plan records' buffers between records (*[]byte): a record
// is written to the journal's file as soon as it is made, and its buffer
// given back (Release). Allocating each afresh was 13% of the bytes termd
// allocated in a run of MCP pairs.
var lines sync.Pool

// maxPooledLine is the largest buffer the pool keeps: a large plan's
// record (its stdin, a long command) is let go, not held by the pool.
const maxPooledLine = keepEncodingsBelow

// lineBuffer is an empty buffer for a record of about n bytes.
func lineBuffer(n int) []byte {
	if b, ok := lines.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:0]
	}
	return make([]byte, 0, n)
}

// Release gives back the buffer of a record Record made, once it is
// written (Journal.Append does not keep it); the caller no longer uses it.
func Release(line []byte) {
	if cap(line) <= maxPooledLine {
		line = line[:0]
		lines.Put(&line)
	}
}

// TombstoneLine is the record of a forgotten plan: its id, session, state
// and receipt, without the request and decision replay needs to restore a
// plan, so replay drops it. Its receipt is the durable word on it.
func TombstoneLine(pp *termdv1.Plan) ([]byte, error) {
	line, err := AppendPlan([]byte(`{"kind":"plan","plan":`), &termdv1.Plan{Id: pp.Id, SessionId: pp.SessionId, State: pp.State, ReceiptId: pp.ReceiptId})
	if err != nil {
		return nil, err
	}
	return append(line, "}\n"...), nil
}

// SessionLine is a session's record.
func SessionLine(ps *termdv1.Session) ([]byte, error) {
	line, err := AppendSession(append(make([]byte, 0, 384), `{"kind":"session","session":`...), ps)
	if err != nil {
		return nil, err
	}
	return append(line, "}\n"...), nil
}
