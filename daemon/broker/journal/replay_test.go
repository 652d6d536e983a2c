package journal

import (
	"encoding/json"
	"testing"
)

// Replay reads a plan record's id from where termd writes it, and decodes
// the plan when it is written otherwise (protojson's spaces, an escape, a
// field before it).
func TestPlanRecordID(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"id":"0b7e6f5c-1","session_id":"s","state":"PLAN_STATE_PLANNED"}`, "0b7e6f5c-1"},
		{`{"id": "spaced","state":"x"}`, "spaced"},
		{`{"id":"a\u0062c"}`, "abc"},
		{`{"state":"x","id":"later"}`, "later"},
	} {
		got, err := planRecordID(json.RawMessage(c.in))
		if err != nil || got != c.want {
			t.Errorf("planRecordID(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`{"state":"x"}`, `{"id":""}`, `[1]`} {
		if got, err := planRecordID(json.RawMessage(bad)); err == nil {
			t.Errorf("planRecordID(%s) = %q, want an error", bad, got)
		}
	}
}
