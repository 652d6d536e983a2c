package domain

import (
	"strings"
	"testing"

	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Every state the API defines has a PlanState of the same name and comes
// back as itself; a value it does not define is PlanInvalid, which no move
// leads to or from.
func TestPlanStateProto(t *testing.T) {
	if len(termdv1.PlanState_name) != len(PlanStates()) {
		t.Fatalf("the API has %d plan states, the domain %d", len(termdv1.PlanState_name), len(PlanStates()))
	}
	for n, name := range termdv1.PlanState_name {
		p := termdv1.PlanState(n)
		s := PlanStateOf(p)
		if want := strings.ToLower(strings.TrimPrefix(name, "PLAN_STATE_")); s.String() != want {
			t.Errorf("%s is %q, want %q", name, s, want)
		}
		if s.Proto() != p {
			t.Errorf("%s comes back as %s", name, s.Proto())
		}
	}
	bad := PlanStateOf(termdv1.PlanState(99))
	if bad != PlanInvalid || len(bad.Next()) != 0 || PlanUnspecified.CanBecome(bad) || bad.IsOpen() || bad.IsFinal() {
		t.Fatalf("an undefined state is %v (next %v)", bad, bad.Next())
	}
}

// Each state is open, in flight (unspecified, running, paused) or settled;
// final states are settled and have no way out; open states can expire.
func TestPlanStateClasses(t *testing.T) {
	for _, s := range PlanStates() {
		flight := s == PlanUnspecified || s == PlanRunning || s == PlanPaused
		n := 0
		for _, b := range []bool{s.IsOpen(), flight, s.IsSettled()} {
			if b {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: open %v, in flight %v, settled %v", s, s.IsOpen(), flight, s.IsSettled())
		}
		if s.IsFinal() && (!s.IsSettled() || len(s.Next()) > 0) {
			t.Errorf("final state %s: settled %v, next %v", s, s.IsSettled(), s.Next())
		}
		if s.IsOpen() && !s.CanBecome(PlanExpired) {
			t.Errorf("open state %s cannot expire", s)
		}
	}
}

// Every execution state the API defines has an ExecState of the same name
// and comes back as itself; an ended execution's state is its plan's final
// state of the same name, found by the status word the runner and the
// receipt share; a receipt status that is no end of a run is none.
func TestExecStateProto(t *testing.T) {
	if len(termdv1.ExecutionState_name) != int(nExecStates) {
		t.Fatalf("the API has %d execution states, the domain %d", len(termdv1.ExecutionState_name), nExecStates)
	}
	for n, name := range termdv1.ExecutionState_name {
		p := termdv1.ExecutionState(n)
		s := ExecStateOf(p)
		if want := strings.ToLower(strings.TrimPrefix(name, "EXECUTION_STATE_")); s.String() != want {
			t.Errorf("%s is %q, want %q", name, s, want)
		}
		if s.Proto() != p {
			t.Errorf("%s comes back as %s", name, s.Proto())
		}
		if s.PlanState().String() != s.String() {
			t.Errorf("%s: its plan is %s", s, s.PlanState())
		}
		end, ok := EndState(s.String())
		if ok != s.IsFinal() || (ok && (end != s || !s.PlanState().IsFinal())) {
			t.Errorf("%s: end state %s, %v; final %v, plan final %v", s, end, ok, s.IsFinal(), s.PlanState().IsFinal())
		}
	}
	for _, st := range []receipt.Status{receipt.StatusBlocked, receipt.StatusDenied, receipt.StatusExpired} {
		if s, ok := EndState(string(st)); ok {
			t.Errorf("receipt status %s is the end state %s", st, s)
		}
	}
	if ExecStateOf(termdv1.ExecutionState(99)) != -1 {
		t.Errorf("an undefined execution state converts to %s", ExecStateOf(termdv1.ExecutionState(99)))
	}
}
