package journal

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// filler sets a message's fields, by its descriptor, from a stream of
// bytes (a fuzzer's input, or random bytes): each field unset, or set to
// a value the bytes pick among the edges (strings with escapes, control
// characters, non-BMP runes and invalid UTF-8; the extremes of each
// integer; enum numbers without a name; timestamps at and past protojson's
// range; messages set but empty). every sets every field, recursively,
// to a value that is not its zero. A field added to any message a journal
// record holds is then filled here without a change to this file.
type filler struct {
	data  []byte
	every bool
}

func (f *filler) next() byte {
	if len(f.data) == 0 {
		return 0
	}
	c := f.data[0]
	f.data = f.data[1:]
	return c
}

func (f *filler) u64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(f.next())
	}
	return v
}

var trickyStrings = []string{
	"", "pwd", "/w/sub dir", "é ✓ \u2028\u2029 日本語 \U0001F600", `"quoted" \ back\slash /`,
	"\x00\x01\x08\x0c\x1f\x7f", "\t\n\r", "<&>'", "\xff\xfe not utf-8", strings.Repeat("long ", 80),
	"\ufffd", "a\u0000b",
}

func (f *filler) str() string {
	if f.every {
		return "set \"é\"\n\x01"
	}
	c := f.next()
	if c < 160 {
		return trickyStrings[int(c)%len(trickyStrings)]
	}
	n := min(int(c-160)%32, len(f.data)) // raw bytes from the input
	s := string(f.data[:n])
	f.data = f.data[n:]
	return s
}

func (f *filler) scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	pick := func(edges ...uint64) uint64 {
		if f.every {
			return edges[0]
		}
		c := f.next()
		if int(c) < len(edges) {
			return edges[c]
		}
		return f.u64()
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(f.every || f.next()&1 == 1)
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		c := int(f.next())
		if f.every {
			c = 1
		}
		switch {
		case c < vs.Len():
			return protoreflect.ValueOfEnum(vs.Get(c).Number())
		case c%2 == 0:
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(c)) // no name
		}
		return protoreflect.ValueOfEnum(-1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(pick(math.MaxInt32, 1, uint64(1)<<31, math.MaxUint32, 0)))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(pick(math.MaxUint32, 1, 0)))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(pick(math.MaxInt64, 1<<63, 1, 1<<53+1, 0)))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(pick(math.MaxUint64, 1, 1<<53+1, 0))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(int32(pick(1, 0))) / 3)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(int64(pick(1, 0))) / 3)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(f.str())
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(f.str()))
	}
	panic("filler: no value for a field of kind " + fd.Kind().String())
}

var timestampName = (&timestamppb.Timestamp{}).ProtoReflect().Descriptor().FullName()

func (f *filler) timestamp(m protoreflect.Message) {
	secs := []int64{1700000000, 0, -62135596800, 253402300799, 253402300800, -62135596801, 1}
	nanos := []int32{1000000, 0, 1, 1000, 120000000, 999999999, 1e9, -1}
	t := m.Interface().(*timestamppb.Timestamp)
	if f.every {
		t.Seconds, t.Nanos = secs[0], nanos[0]
		return
	}
	t.Seconds, t.Nanos = secs[int(f.next())%len(secs)], nanos[int(f.next())%len(nanos)]
}

func (f *filler) fill(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !f.every && f.next()%3 == 0 {
			continue // unset
		}
		n := 1
		if !f.every {
			n = int(f.next() % 4) // 0: an empty list or map
		}
		switch {
		case fd.IsMap():
			mm := m.Mutable(fd).Map()
			for range n {
				mm.Set(f.scalar(fd.MapKey()).MapKey(), f.scalar(fd.MapValue()))
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range n {
				if fd.Message() != nil {
					e := l.NewElement()
					f.message(fd, e.Message())
					l.Append(e)
				} else {
					l.Append(f.scalar(fd))
				}
			}
		case fd.Message() != nil:
			f.message(fd, m.Mutable(fd).Message())
		default:
			m.Set(fd, f.scalar(fd))
		}
	}
}

// message fills a message field's value, or leaves it set but empty.
func (f *filler) message(fd protoreflect.FieldDescriptor, m protoreflect.Message) {
	switch {
	case fd.Message().FullName() == timestampName:
		f.timestamp(m)
	case f.every || f.next()%4 != 0:
		f.fill(m)
	}
}

// everySet fails t unless every field of m is set, recursively.
func everySet(t *testing.T, m protoreflect.Message, path string) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			t.Fatalf("field %s.%s is not set: the filler must set it", path, fd.Name())
		}
		if fd.Message() != nil && !fd.IsList() && !fd.IsMap() && fd.Message().FullName() != timestampName {
			everySet(t, m.Get(fd).Message(), path+"."+string(fd.Name()))
		}
	}
}

// checkDirect holds the direct encoding of m (a Plan or a Session) to
// protojson's: an error exactly where protojson refuses m, else JSON that
// protojson reads back as m (proto.Equal: an empty message is not an unset
// one) and that is, as JSON, what protojson writes. A plan's whole record
// reads back as the record replay reads, its id where replay looks first.
func checkDirect(t *testing.T, m proto.Message) {
	t.Helper()
	var got []byte
	var err error
	switch v := m.(type) {
	case *termdv1.Plan:
		got, err = AppendPlan(nil, v)
	case *termdv1.Session:
		got, err = AppendSession(nil, v)
	}
	want, werr := pjm.Marshal(m)
	if werr != nil {
		if err == nil {
			t.Fatalf("protojson refuses %v (%v), the direct encoding wrote\n%s", m, werr, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("the direct encoding failed (%v) where protojson wrote\n%s", err, want)
	}
	back := m.ProtoReflect().New().Interface()
	if err := pju.Unmarshal(got, back); err != nil || !proto.Equal(back, m) {
		t.Fatalf("the direct encoding reads back as\n%v (%v)\nnot\n%v\nit wrote\n%s", back, err, m, got)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("the direct encoding is not JSON: %v\n%s", err, got)
	}
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("the direct encoding wrote\n%s\nprotojson\n%s", got, want)
	}
	pp, ok := m.(*termdv1.Plan)
	if !ok {
		return
	}
	stdin := []byte("in\x00put")
	line, err := (&PlanEncoding{}).PlanLine(pp, &policy.Request{Argv: []string{"cat"}}, &policy.Decision{RequestHash: "h"}, stdin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(line, []byte("}\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("not one line: %q", line)
	}
	var rr ReplayRecord
	var rec Record
	if err := json.Unmarshal(line, &rr); err != nil || json.Unmarshal(line, &rec) != nil || rr.Kind != KindPlan ||
		!bytes.Equal(rec.Stdin, stdin) || rec.Decision.RequestHash != "h" {
		t.Fatalf("the record does not replay (%v):\n%s", err, line)
	}
	if !bytes.Equal(rr.Plan, got) {
		t.Fatalf("the record holds\n%s\nnot\n%s", rr.Plan, got)
	}
	if id, err := planRecordID(rr.Plan); pp.Id != "" && (err != nil || id != pp.Id) {
		t.Fatalf("replay reads the id %q (%v), not %q", id, err, pp.Id)
	}
}

// checkFilled fills a plan, a session, a request and a decision (policy
// form) from data and checks each.
func checkFilled(t *testing.T, data []byte) {
	t.Helper()
	for _, m := range []proto.Message{&termdv1.Plan{}, &termdv1.Session{}} {
		f := &filler{data: data}
		f.fill(m.ProtoReflect())
		checkDirect(t, m)
	}
	checkPolicyFilled(t, data)
}

// TestDirectEncodingEveryField: the direct encoding writes what protojson
// writes for a plan and a session with every field of every message they
// hold set (a field added to one of them is set by the filler, and fails
// this until it is written), timestamps of each precision and at the ends
// of their range, and defers to protojson for what it refuses (a string
// that is not UTF-8, a timestamp out of range).
func TestDirectEncodingEveryField(t *testing.T) {
	for _, m := range []proto.Message{&termdv1.Plan{}, &termdv1.Session{}} {
		(&filler{every: true}).fill(m.ProtoReflect())
		everySet(t, m.ProtoReflect(), string(m.ProtoReflect().Descriptor().Name()))
		checkDirect(t, m)
	}
	full := &termdv1.Plan{}
	(&filler{every: true}).fill(full.ProtoReflect())
	for _, sec := range []int64{-62135596800, 0, 253402300799, 253402300800, -62135596801} {
		for _, ns := range []int32{0, 1, 1000, 1000000, 120000000, 999999999, 1e9, -1} {
			p := proto.Clone(full).(*termdv1.Plan)
			p.UpdatedAt = &timestamppb.Timestamp{Seconds: sec, Nanos: ns}
			checkDirect(t, p)
		}
	}
	checkDirect(t, &termdv1.Plan{})
	checkDirect(t, &termdv1.Session{})
	unnamed := proto.Clone(full).(*termdv1.Plan)
	unnamed.State, unnamed.Decision.Risk = 99, -3
	checkDirect(t, unnamed)
	bad := proto.Clone(full).(*termdv1.Plan)
	bad.Decision.Env["k"] = "\xff"
	if _, err := AppendPlan(nil, bad); err == nil {
		t.Fatal("a string that is not UTF-8 was written")
	}
	empty := &termdv1.Plan{Id: "p", Preview: &termdv1.Preview{}, Approval: &termdv1.Approval{}, Decision: &termdv1.Decision{Steps: []*termdv1.PolicyStep{{}}}}
	checkDirect(t, empty)
}

// TestDirectEncodingMatchesProtojson: thousands of plans and sessions
// filled from random bytes encode as protojson does (checkDirect).
func TestDirectEncodingMatchesProtojson(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 35))
	data := make([]byte, 4096)
	for range 3000 {
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		checkFilled(t, data)
	}
}

// FuzzDirectEncoding: whatever plan or session the fuzzer's bytes fill
// (filler), the direct encoding is protojson's (checkDirect); whatever
// request and decision they fill, json.Marshal's (checkPolicyEncoding).
func FuzzDirectEncoding(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add(bytes.Repeat([]byte{1}, 64))
	f.Add(bytes.Repeat([]byte{0xff, 0x07, 0xa0}, 20))
	f.Fuzz(checkFilled)
}
