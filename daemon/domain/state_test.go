package domain

import (
	"fmt"
	"strings"
	"testing"

	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Every state the API defines has a PlanState of the same name and comes
// back as itself; a value it does not define is PlanInvalid, which no move
// leads to or from.
func TestPlanStateProto(t *testing.T) {
	sameNames(t, termdv1.PlanState_name, "PLAN_STATE_", len(PlanStates()), PlanStateOf, PlanState.Proto)
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
	sameNames(t, termdv1.ExecutionState_name, "EXECUTION_STATE_", int(nExecStates), ExecStateOf, ExecState.Proto)
	for n := range termdv1.ExecutionState_name {
		s := ExecStateOf(termdv1.ExecutionState(n))
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

// sameNames checks that the API's enum (its names, with prefix) and the
// domain's type have as many values, that each API value converts (of) to
// the domain value of the same word, and that it converts back (back).
func sameNames[P ~int32, S fmt.Stringer](t *testing.T, names map[int32]string, prefix string, n int, of func(P) S, back func(S) P) {
	t.Helper()
	if len(names) != n {
		t.Fatalf("the API has %d %s values, the domain %d", len(names), prefix, n)
	}
	for v, name := range names {
		p := P(v)
		s := of(p)
		if want := strings.ToLower(strings.TrimPrefix(name, prefix)); s.String() != want {
			t.Errorf("%s is %q, want %q", name, s, want)
		}
		if back(s) != p {
			t.Errorf("%s comes back as %v", name, back(s))
		}
	}
}
