package journal

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

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
		got, err := (&PlanEncoding{}).planJSON(pp)
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
