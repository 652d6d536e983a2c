package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The kinds of record.
const (
	KindSession = "session"
	KindPlan    = "plan"
	KindGrant   = "grant"
)

// Record is one line of the journal.
type Record struct {
	Kind    string          `json:"kind"` // "session", "plan" or "grant"
	Session json.RawMessage `json:"session,omitempty"`
	// Grant and GrantMatch are a grant and its pattern and binding (the
	// broker's grants).
	Grant      json.RawMessage `json:"grant,omitempty"`
	GrantMatch json.RawMessage `json:"grant_match,omitempty"`
	Plan       json.RawMessage `json:"plan,omitempty"`
	Request    *policy.Request `json:"request,omitempty"`
	// Decision is what the plan was decided on (re-checked before it runs).
	Decision *policy.Decision `json:"decision,omitempty"`
	// Stdin is an open plan's standard input.
	Stdin []byte `json:"stdin,omitempty"`
}

// ReplayRecord is a Record as replay reads it: a plan's request and
// decision are decoded only from its latest record.
type ReplayRecord struct {
	Kind       string          `json:"kind"`
	Session    json.RawMessage `json:"session,omitempty"`
	Grant      json.RawMessage `json:"grant,omitempty"`
	GrantMatch json.RawMessage `json:"grant_match,omitempty"`
	Plan       json.RawMessage `json:"plan,omitempty"`
	Request    json.RawMessage `json:"request,omitempty"`
	Decision   json.RawMessage `json:"decision,omitempty"`
	Stdin      json.RawMessage `json:"stdin,omitempty"`
}

// ProtoMarshal and ProtoUnmarshal are how the protobuf messages in records
// are written and read (protojson with the proto field names).
var (
	ProtoMarshal   = protojson.MarshalOptions{UseProtoNames: true}
	ProtoUnmarshal = protojson.UnmarshalOptions{DiscardUnknown: false}
)

var pjm, pju = ProtoMarshal, ProtoUnmarshal

// maxRecord is the largest journal line replayed at start; requests are
// bounded far below it (plans.max_request_bytes), so a longer line is damage.
const maxRecord = 64 << 20

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

// Replayed is what a journal holds: the latest record of each session and
// of each plan, in the order each first appeared.
type Replayed struct {
	Sessions     map[string]*termdv1.Session
	SessionOrder []string
	// Plans are the plans' latest records, undecoded: the broker decodes
	// each once (and may delete it from the map then, to free it early).
	Plans     map[string]ReplayRecord
	PlanOrder []string
	// Bytes is the size of the file replayed.
	Bytes int64
}

// Replay reads the journal at path (none: nothing to replay). A grant
// record goes to grant as it is read (the latest of each id wins). A record
// that cannot be read is logged and skipped, never fatal: a torn last line
// is what a crash mid-write leaves; only a failure to read the file is an
// error.
func Replay(path string, log *slog.Logger, grant func(Record) error) (*Replayed, error) {
	rp := &Replayed{Sessions: map[string]*termdv1.Session{}, Plans: map[string]ReplayRecord{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return rp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the plan journal: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		rp.Bytes = st.Size()
	}
	r := replayer{Replayed: rp, path: path, log: log, grant: grant}
	if err := r.read(bufio.NewReaderSize(f, 1<<20)); err != nil {
		return nil, fmt.Errorf("reading the plan journal %s: %w", path, err)
	}
	return rp, nil
}

// replayer reads a journal's lines into a Replayed.
type replayer struct {
	*Replayed
	path  string
	log   *slog.Logger
	grant func(Record) error
	line  int
}

// read reads every line up to the end of the file.
func (r *replayer) read(rd *bufio.Reader) error {
	for {
		rec, tooLong, err := readRecord(rd, maxRecord)
		// At the end, or a failed read, with nothing read: no line.
		if err == nil || len(rec) > 0 || tooLong {
			r.line++
			if tooLong {
				// Never fatal: one oversized record must not keep termd from starting.
				r.log.Warn("plan journal: skipping an oversized record", "file", r.path, "line", r.line, "limit_bytes", maxRecord)
			} else {
				r.add(rec)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// add takes one line: a session or plan record supersedes the one before
// it of the same id; a grant's goes to grant.
func (r *replayer) add(rec []byte) {
	var rr ReplayRecord
	if err := json.Unmarshal(rec, &rr); err != nil {
		// A torn last line (crash mid-write) is expected; anything else is reported.
		r.log.Warn("plan journal: skipping an unreadable record", "file", r.path, "line", r.line, "error", err)
		return
	}
	switch rr.Kind {
	case KindSession:
		s := &termdv1.Session{}
		if err := pju.Unmarshal(rr.Session, s); err != nil {
			r.log.Warn("plan journal: bad session record", "line", r.line, "error", err)
			return
		}
		if _, ok := r.Sessions[s.Id]; !ok {
			r.SessionOrder = append(r.SessionOrder, s.Id)
		}
		r.Sessions[s.Id] = s
	case KindPlan:
		// Only the id now: the latest record of each plan is decoded by the broker.
		id, err := planRecordID(rr.Plan)
		if err != nil {
			r.log.Warn("plan journal: bad plan record", "line", r.line, "error", err)
			return
		}
		if _, ok := r.Plans[id]; !ok {
			r.PlanOrder = append(r.PlanOrder, id)
		}
		r.Plans[id] = rr
	case KindGrant:
		if err := r.grant(Record{Kind: rr.Kind, Grant: rr.Grant, GrantMatch: rr.GrantMatch}); err != nil {
			r.log.Warn("plan journal: skipping a grant record", "line", r.line, "error", err)
		}
	}
}

// planRecordID is the id of a plan record's plan (valid JSON): read from
// its start, where termd writes it (PlanLine, TombstoneLine), without
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
