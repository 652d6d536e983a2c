package broker

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

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
