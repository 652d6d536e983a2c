package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

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
			line, err := planLine(rec.p, rec)
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

// BenchmarkJournalPlanRecord: encoding one plan record of the journal (a
// `pwd` plan as the default policy decides it), as at create, start and
// end: the assembled line against json.Marshal of the record.
func BenchmarkJournalPlanRecord(b *testing.B) {
	t := &testing.T{}
	r := newRig(t)
	p := r.plan(t, operator, r.session(t, operator), "pwd")
	r.mu.Lock()
	rec := r.plans[p.Id]
	r.mu.Unlock()
	b.Run("line", func(b *testing.B) {
		for b.Loop() {
			if _, err := planLine(rec.p, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			data, _ := pjm.Marshal(rec.p)
			if _, err := json.Marshal(journalRecord{Kind: "plan", Plan: data, Request: &rec.req, Decision: &rec.dec}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPlanJSONEveryField: planJSON writes what protojson writes for a plan
// with every field of Plan set (a field added to Plan must be set here, and
// then be written by restJSON or kept with the body), with strings that need
// escaping and timestamps of each precision, and defers to protojson where
// restJSON would not know (an enum value without a name, a string that is
// not UTF-8, which protojson refuses).
func TestPlanJSONEveryField(t *testing.T) {
	at := func(sec int64, nanos int32) *timestamppb.Timestamp {
		return &timestamppb.Timestamp{Seconds: sec, Nanos: nanos}
	}
	full := &termdv1.Plan{
		Id: "p-1", SessionId: "s \"quoted\" \\ \t\n\x01 é ✓ \u2028", State: termdv1.PlanState_PLAN_STATE_RUNNING,
		Request:   &termdv1.CommandRequest{Argv: []string{"ls", "<&>"}, Cwd: "/w"},
		Decision:  &termdv1.Decision{Reasons: []string{"r"}},
		Preview:   &termdv1.Preview{},
		Limits:    &termdv1.Limits{TimeoutSeconds: 3},
		Requester: &termdv1.Principal{Uid: 7, Name: "n"},
		Approval:  &termdv1.Approval{RequestHash: "h"},
		Denial:    &termdv1.Denial{Reason: "no"},
		CreatedAt: at(1700000000, 0), UpdatedAt: at(1700000000, 1000000), ExpiresAt: at(0, 1),
		ExecutionId: "e", ReceiptId: "r", ReplannedFrom: "p-0", FlaggedByAdviser: true,
		AdviceDigest: "d", NextStep: "run it", GrantId: "g",
	}
	fields := full.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); !full.ProtoReflect().Has(fd) {
			t.Fatalf("field %s of Plan is not set in this test: set it, and make sure planJSON writes it", fd.Name())
		}
	}
	check := func(name string, pp *termdv1.Plan) {
		t.Helper()
		got, err := (&planRec{}).planJSON(pp)
		want, werr := pjm.Marshal(pp)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%s: planJSON error %v, protojson's %v", name, err, werr)
		}
		if err != nil {
			return
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
		}
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: planJSON wrote\n%s\nprotojson\n%s", name, got, want)
		}
		back := &termdv1.Plan{}
		if err := pju.Unmarshal(got, back); err != nil || !proto.Equal(back, pp) {
			t.Fatalf("%s: reads back as %v (%v)", name, back, err)
		}
	}
	check("every field", full)
	for _, ns := range []int32{0, 1, 1000, 1000000, 120000000, 999999999} {
		p := proto.Clone(full).(*termdv1.Plan)
		p.UpdatedAt = at(253402300799, ns)
		check(fmt.Sprintf("nanos %d", ns), p)
	}
	check("empty", &termdv1.Plan{})
	unnamed := proto.Clone(full).(*termdv1.Plan)
	unnamed.State = 99
	check("an enum value without a name", unnamed)
	if _, ok := restJSON(unnamed); ok {
		t.Error("restJSON wrote an enum value without a name")
	}
	bad := proto.Clone(full).(*termdv1.Plan)
	bad.NextStep = "\xff"
	check("not UTF-8", bad)
}
