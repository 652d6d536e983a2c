package broker

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/termd/termd/daemon/broker/journal"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// pjm and pju are protojson as the journal writes and reads it.
var pjm, pju = journal.ProtoMarshal, journal.ProtoUnmarshal

// TestPlanLineIsTheRecordFormat: a plan's journal line, assembled from its
// parts, holds what json.Marshal of journalRecord writes (what journals
// written before hold, and what replay reads), in every state a plan is
// recorded in, also after its body changed (the adviser adds a reason), and
// it replays to the same plan, request and decision.
func TestPlanLineIsTheRecordFormat(t *testing.T) {
	r := newRig(t)
	sid := r.session(t, operator)
	for _, argv := range [][]string{{"pwd"}, {"ls", "-la", "sub dir"}, {"rm", "-rf", "/"}} {
		p, err := r.CreatePlan(t.Context(), operator, sid, &termdv1.CommandRequest{Argv: argv, Cwd: r.ws, Env: map[string]string{"A": "<b>&", "B": "2"}})
		if err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		rec := r.plans[p.Id]
		r.mu.Unlock()
		for i := range 4 { // later lines reuse what was encoded
			// The plan is the broker's: it changes and is read under its
			// mutex (its sweeper looks at plans too).
			r.mu.Lock()
			switch i {
			case 2:
				rec.p.State, rec.p.ExecutionId, rec.p.NextStep = termdv1.PlanState_PLAN_STATE_RUNNING, "e-1", "wait"
			case 3:
				rec.p.Decision.Reasons = append(rec.p.Decision.Reasons, "the adviser flagged this plan")
			}
			line, err := rec.enc.Record(rec.p, &rec.req, &rec.dec, &rec.stdin, false)
			data, merr := pjm.Marshal(rec.p)
			snap := proto.Clone(rec.p)
			r.mu.Unlock()
			if err != nil || merr != nil {
				t.Fatal(err, merr)
			}
			if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
				t.Fatalf("%v: not one line: %q", argv, line)
			}
			want, err := json.Marshal(journalRecord{Kind: "plan", Plan: data, Request: &rec.req, Decision: &rec.dec})
			if err != nil {
				t.Fatal(err)
			}
			var got, exp any
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatalf("%v: not JSON: %v\n%s", argv, err, line)
			}
			_ = json.Unmarshal(want, &exp)
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("%v: line %d differs from the record format:\n%s\nwant\n%s", argv, i, line, want)
			}
			var back journalRecord
			if err := json.Unmarshal(line, &back); err != nil || back.Kind != "plan" || back.Request == nil || back.Decision == nil {
				t.Fatalf("%v: does not replay: %v", argv, err)
			}
			bp := &termdv1.Plan{}
			if err := pju.Unmarshal(back.Plan, bp); err != nil || !proto.Equal(bp, snap) {
				t.Fatalf("%v: line %d replays another plan (%v):\n%v\nwant\n%v", argv, i, err, bp, snap)
			}
			if back.Decision.RequestHash != rec.dec.RequestHash || back.Request.Cwd != rec.req.Cwd {
				t.Fatalf("%v: replayed %+v", argv, back)
			}
		}
	}
}

// TestPlanLineCorpus: the record of every plan the real policy makes of
// the adversarial corpus's commands and a third of their twins
// (daemon/policy's testdata), as it is and with its strings, numbers and messages changed to
// edge values (escapes, control characters, non-BMP runes, the extremes of
// int64, messages set but empty), replays to the same plan, request and
// decision, and holds as JSON what json.Marshal of the record with
// protojson's plan holds.
func TestPlanLineCorpus(t *testing.T) {
	r := newRig(t)
	// The records are made here; writing and syncing them too (the plans
	// that ask are durable before they are answered) would take minutes.
	r.mu.Lock()
	r.journal.Close()
	r.journal = nil
	r.mu.Unlock()
	data, err := os.ReadFile("../policy/testdata/corpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Argv []string          `yaml:"argv"`
		Cmd  string            `yaml:"cmd"`
		Env  map[string]string `yaml:"env"`
		Twin []string          `yaml:"twin"`
	}
	if err := yaml.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{ws}", r.ws, "{home}", "/root", "{out}", "/tmp/out", "{prot}", "/etc/termd")
	subst := func(argv []string) []string {
		out := make([]string, len(argv))
		for i, a := range argv {
			out[i] = fill.Replace(a)
		}
		return out
	}
	made := 0
	for i, c := range cases {
		for k, req := range []*termdv1.CommandRequest{
			{Argv: subst(c.Argv), Command: fill.Replace(c.Cmd), Env: c.Env, Cwd: r.ws},
			{Argv: subst(c.Twin), Cwd: r.ws, Stdin: []byte("in\x00é")},
		} {
			if len(req.Argv) > 0 && req.Command != "" || len(req.Argv) == 0 && req.Command == "" || k == 1 && i%3 != 0 {
				continue
			}
			p, err := r.CreatePlan(t.Context(), operator, "", req)
			if err != nil {
				continue // refused before a decision (an env name, say)
			}
			made++
			r.mu.Lock()
			rec := r.plans[p.Id]
			pp := proto.Clone(rec.p).(*termdv1.Plan)
			r.mu.Unlock()
			checkPlanLine(t, rec, pp)
			checkPlanLine(t, rec, edgeValues(proto.Clone(pp).(*termdv1.Plan), i+k))
		}
	}
	t.Logf("%d plans of %d corpus cases and a third of their twins", made, len(cases))
	if made < len(cases)*9/10 {
		t.Fatalf("only %d plans made of %d corpus cases", made, len(cases))
	}
}

// checkPlanLine: plan state pp of rec's record, written by a fresh
// encoding, replays to pp, rec's request, decision and stdin, and is as
// JSON the record json.Marshal writes with protojson's plan.
func checkPlanLine(t *testing.T, rec *planRec, pp *termdv1.Plan) {
	t.Helper()
	stdin := []byte("stdin\n")
	line, err := (&journal.PlanEncoding{}).PlanLine(pp, &rec.req, &rec.dec, stdin)
	data, merr := pjm.Marshal(pp)
	if err != nil || merr != nil {
		t.Fatalf("plan %v: %v, protojson: %v", pp, err, merr)
	}
	want, err := json.Marshal(journalRecord{Kind: "plan", Plan: data, Request: &rec.req, Decision: &rec.dec, Stdin: stdin})
	if err != nil {
		t.Fatal(err)
	}
	var got, exp any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, line)
	}
	_ = json.Unmarshal(want, &exp)
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("the record\n%s\nis not the record format\n%s", line, want)
	}
	var back journalRecord
	bp := &termdv1.Plan{}
	if err := json.Unmarshal(line, &back); err != nil || pju.Unmarshal(back.Plan, bp) != nil || !proto.Equal(bp, pp) ||
		!reflect.DeepEqual(*back.Request, rec.req) || !bytes.Equal(back.Stdin, stdin) {
		t.Fatalf("the record\n%s\nreplays another plan (%v):\n%v\nwant\n%v", line, err, bp, pp)
	}
	if back.Decision.RequestHash != rec.dec.RequestHash || !reflect.DeepEqual(back.Decision.Argv, rec.dec.Argv) {
		t.Fatalf("replayed decision %+v, want %+v", back.Decision, rec.dec)
	}
}

// edgeValues sets every string of pp that is set to an edge value (the
// k-th), its int64s to the extremes, and its unset messages to empty ones.
func edgeValues(pp *termdv1.Plan, k int) *termdv1.Plan {
	strs := []string{"é ✓ \u2028 日本語 \U0001F600", "\"q\" \\ \x00\x01\x1f\x7f\t\n\r", "<&>", ""}
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			switch {
			case fd.IsMap():
				if mm := m.Get(fd).Map(); mm.Len() > 0 {
					mm.Set(protoreflect.ValueOfString(strs[k%len(strs)]).MapKey(), protoreflect.ValueOfString(strs[(k+1)%len(strs)]))
				}
			case fd.IsList():
				if l := m.Get(fd).List(); l.Len() > 0 && fd.Kind() == protoreflect.StringKind {
					l.Set(0, protoreflect.ValueOfString(strs[(k+i)%len(strs)]))
				} else if fd.Message() != nil {
					for j := range l.Len() {
						walk(l.Get(j).Message())
					}
				}
			case fd.Message() != nil:
				if !m.Has(fd) {
					m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
				} else if fd.Message().FullName() != "google.protobuf.Timestamp" {
					walk(m.Get(fd).Message())
				}
			case fd.Kind() == protoreflect.StringKind && m.Has(fd) && fd.Name() != "id":
				m.Set(fd, protoreflect.ValueOfString(strs[(k+i)%len(strs)]))
			case fd.Kind() == protoreflect.Int64Kind:
				m.Set(fd, protoreflect.ValueOfInt64([]int64{math.MaxInt64, math.MinInt64, -1}[k%3]))
			}
		}
	}
	walk(pp.ProtoReflect())
	return pp
}

// BenchmarkJournalPlanRecord: encoding one plan record of the journal (a
// `pwd` plan as the default policy decides it). "first" is a plan's first
// record (nothing kept yet), "next" a later one (made, started, ended);
// direct is journal.PlanEncoding, cached the encoding it replaced
// (journal_baseline_test.go: protojson for the plan's messages, kept while
// unchanged), protojson json.Marshal of the record with protojson's plan.
// BenchmarkJournalSessionRecord does the same for a session's record.
func BenchmarkJournalPlanRecord(b *testing.B) {
	t := &testing.T{}
	r := newRig(t)
	p := r.plan(t, operator, r.session(t, operator), "pwd")
	r.mu.Lock()
	rec := r.plans[p.Id]
	r.mu.Unlock()
	pp, req, dec := rec.p, &rec.req, &rec.dec
	variants := []struct {
		name string
		line func(first bool) ([]byte, error)
	}{
		{"direct", func(first bool) ([]byte, error) {
			if first {
				rec.enc.Drop()
			}
			return rec.enc.PlanLine(pp, req, dec, nil)
		}},
		{"cached", func() func(bool) ([]byte, error) {
			var e *cachedEncoding
			return func(first bool) ([]byte, error) {
				if first || e == nil {
					e = &cachedEncoding{}
				}
				return e.PlanLine(pp, req, dec, nil)
			}
		}()},
		{"protojson", func(bool) ([]byte, error) {
			data, err := pjm.Marshal(pp)
			if err != nil {
				return nil, err
			}
			return json.Marshal(journalRecord{Kind: "plan", Plan: data, Request: req, Decision: dec})
		}},
	}
	for _, c := range variants {
		for _, first := range []bool{true, false} {
			name := c.name + "/next"
			if first {
				name = c.name + "/first"
			}
			b.Run(name, func(b *testing.B) {
				if _, err := c.line(true); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := c.line(first); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	// alternating: blocks of each variant in turn, timed in the process's
	// CPU time (getrusage: a busy machine's waits are not counted, the
	// garbage collector's work is); reports the median block's CPU ns per
	// record of each and their ratios to direct.
	b.Run("alternating", func(b *testing.B) {
		const block = 100
		cpu := func() int64 {
			var ru syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
				b.Fatal(err)
			}
			return ru.Utime.Nano() + ru.Stime.Nano()
		}
		per := map[string][]float64{}
		for b.Loop() {
			for _, c := range variants {
				for _, first := range []bool{true, false} {
					name := c.name + "-next"
					if first {
						name = c.name + "-first"
					}
					_, _ = c.line(true)
					start := cpu()
					for range block {
						if _, err := c.line(first); err != nil {
							b.Fatal(err)
						}
					}
					per[name] = append(per[name], float64(cpu()-start)/block)
				}
			}
		}
		med := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
		for name, xs := range per {
			per[name] = []float64{med(xs)}
			b.ReportMetric(per[name][0], name+"-cpu-ns/record")
		}
		for _, k := range []string{"first", "next"} {
			for _, base := range []string{"cached", "protojson"} {
				b.ReportMetric(per["direct-"+k][0]/per[base+"-"+k][0], "direct/"+base+"-"+k)
			}
		}
	})
}

func BenchmarkJournalSessionRecord(b *testing.B) {
	t := &testing.T{}
	r := newRig(t)
	sid := r.session(t, operator)
	r.mu.Lock()
	s := r.sessions[sid]
	r.mu.Unlock()
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			r.mu.Lock()
			_, err := r.sessionLine(s)
			r.mu.Unlock()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		for b.Loop() {
			r.mu.Lock()
			ps := r.sessionProto(s)
			r.mu.Unlock()
			ps.ActiveExecutionId = ""
			data, err := pjm.Marshal(ps)
			if err == nil {
				_, err = json.Marshal(journalRecord{Kind: "session", Session: data})
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
