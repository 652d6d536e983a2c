package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The journal's plan encoding before the direct one (journal.AppendPlan),
// kept as BenchmarkJournalPlanRecord's baseline: protojson for the plan's
// message fields, cached between records while their binary encoding is
// unchanged, and its scalar fields written directly.

// cachedEncoding keeps, between a plan's records, the parts of its record
// that rarely change (see PlanLine). Its zero value is ready; the broker
// keeps one per plan.
type cachedEncoding struct {
	mu sync.Mutex
	// tail is the end of the plan's records (its request and decision,
	// which never change), encoded once.
	tail []byte
	// bodyBin and bodyJSON are the binary and JSON encodings of the plan's
	// body fields in its last record (oldPlanJSON).
	bodyBin, bodyJSON []byte
}

// PlanLine encodes a plan record (plan state pp, decided on req and dec,
// with stdin, an open plan's standard input, or nil) as json.Marshal of
// Record{Kind: "plan", Plan, Request, Decision, Stdin} would, up to the
// order of the plan's fields and the spaces protojson writes: a plan gets
// three or more records (made, started, ended) and most of each never
// changes, so the request and decision are encoded once, the plan's own
// body is reused while it is unchanged (oldPlanJSON), and nothing is scanned
// again as a json.RawMessage would be. Encoding the records was ~5% of
// termd's CPU per execution.
func (e *cachedEncoding) PlanLine(pp *termdv1.Plan, req *policy.Request, dec *policy.Decision, stdin []byte) ([]byte, error) {
	e.mu.Lock()
	tail := e.tail
	if tail == nil {
		rq, rerr := json.Marshal(req)
		dc, derr := json.Marshal(dec)
		if err := errors.Join(rerr, derr); err != nil {
			e.mu.Unlock()
			return nil, fmt.Errorf("encoding the request and decision of plan %s: %w", pp.Id, err)
		}
		t := append([]byte(`,"request":`), rq...)
		tail = append(append(t, `,"decision":`...), dc...)
		e.tail = tail
	}
	e.mu.Unlock()
	plan, err := e.oldPlanJSON(pp)
	if err != nil {
		return nil, err
	}
	// An open plan's stdin goes with it until it runs (then the intent and
	// the receipt are the record, and the bytes are let go); written after
	// the decision, as json.Marshal of Record would.
	var in []byte
	if stdin != nil {
		if in, err = json.Marshal(stdin); err != nil {
			return nil, err
		}
	}
	line := make([]byte, 0, len(`{"kind":"plan","plan":`)+len(plan)+len(tail)+len(`,"stdin":`)+len(in)+2)
	line = append(append(line, `{"kind":"plan","plan":`...), plan...)
	line = append(line, tail...)
	if in != nil {
		line = append(append(line, `,"stdin":`...), in...)
	}
	return append(line, "}\n"...), nil
}

// oldPlanJSON is the protojson of plan state pp. Its message fields (request,
// decision, preview, limits, requester, approval, denial: set once or
// rarely) are encoded by protojson and kept from the last record, reused
// while their binary encoding (cheap to make) is the same, so a change to
// them (the adviser adds a reason) is never missed; the scalar fields and
// timestamps, which change from record to record, are written directly
// (oldRestJSON; protojson took ~20 us per record for them) and the two
// objects joined.
func (e *cachedEncoding) oldPlanJSON(pp *termdv1.Plan) ([]byte, error) {
	body := &termdv1.Plan{Request: pp.Request, Decision: pp.Decision, Preview: pp.Preview, Limits: pp.Limits,
		Requester: pp.Requester, Approval: pp.Approval, Denial: pp.Denial}
	bin, err := proto.MarshalOptions{Deterministic: true}.Marshal(body)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.bodyJSON == nil || !bytes.Equal(bin, e.bodyBin) {
		j, err := pjm.Marshal(body)
		if err != nil {
			e.mu.Unlock()
			return nil, err
		}
		e.bodyBin, e.bodyJSON = bin, bytes.TrimSpace(j)
	}
	bj := e.bodyJSON
	e.mu.Unlock()
	rj, ok := oldRestJSON(pp)
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

// oldRestJSON is what protojson (proto names) writes for pp's scalar fields
// and timestamps, up to spaces; false when it would not know (a string
// that is not UTF-8, a timestamp out of range, an enum value without a
// name), for protojson to decide.
func oldRestJSON(pp *termdv1.Plan) ([]byte, bool) {
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
		out = oldAppendJSONString(append(oldAppendJSONString(out, name), ':'), v)
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
		out = oldAppendJSONString(append(oldAppendJSONString(out, name), ':'), x+"Z")
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

// oldAppendJSONString appends s (valid UTF-8) as a JSON string.
func oldAppendJSONString(out []byte, s string) []byte {
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
