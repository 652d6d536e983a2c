package domain

import (
	"fmt"
	"slices"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// PlanState is where a plan is in its life (ARCHITECTURE §5): decided
// (planned, awaiting approval, blocked), approved, denied or expired, running
// or paused, and one of the final states of its execution.
type PlanState int

const (
	PlanUnspecified PlanState = iota // not decided yet: a plan being made
	PlanPlanned                      // allowed: it may run now
	PlanAwaitingApproval
	PlanApproved
	PlanDenied  // a person denied it
	PlanBlocked // the policy denied it
	PlanExpired // not run in time, stale at its start, or its session closed
	PlanRunning
	PlanPaused
	PlanSucceeded
	PlanFailed
	PlanTimedOut
	PlanCancelled
	PlanKilled
	PlanOutcomeUnknown // termd stopped while it ran
	PlanOutputLimit
	nPlanStates
)

// PlanInvalid is what PlanStateOf makes of a value the API does not define:
// no move leads to or from it.
const PlanInvalid PlanState = -1

var planStateWords = [nPlanStates]string{"unspecified", "planned", "awaiting_approval", "approved", "denied", "blocked", "expired",
	"running", "paused", "succeeded", "failed", "timed_out", "cancelled", "killed", "outcome_unknown", "output_limit"}

// String is the state as a word: "awaiting_approval".
func (s PlanState) String() string {
	if s < 0 || s >= nPlanStates {
		return fmt.Sprintf("invalid plan state (%d)", int(s))
	}
	return planStateWords[s]
}

// PlanStates are all the states, in order.
func PlanStates() []PlanState {
	all := make([]PlanState, nPlanStates)
	for i := range all {
		all[i] = PlanState(i)
	}
	return all
}

// planTransitions is the plan state machine, in one place. Every state
// change goes through it: a new plan moves from unspecified to its decided
// state, and a start refused before anything was spawned (a stale plan)
// moves running to expired. Only restoring a plan at start may set a state
// directly, and only a final one the receipt store proves.
var planTransitions = map[PlanState][]PlanState{
	// A new plan an operator's grant covers starts approved.
	PlanUnspecified:      {PlanPlanned, PlanAwaitingApproval, PlanBlocked, PlanApproved},
	PlanPlanned:          {PlanRunning, PlanExpired, PlanAwaitingApproval},
	PlanAwaitingApproval: {PlanApproved, PlanDenied, PlanExpired},
	PlanApproved:         {PlanRunning, PlanExpired},
	PlanRunning: {PlanPaused, PlanSucceeded, PlanFailed,
		PlanTimedOut, PlanCancelled, PlanKilled, PlanOutcomeUnknown, PlanOutputLimit,
		PlanExpired},
	PlanPaused: {PlanRunning, PlanSucceeded, PlanFailed,
		PlanTimedOut, PlanCancelled, PlanKilled, PlanOutcomeUnknown, PlanOutputLimit},
}

// Next are the states a plan in state s may move to.
func (s PlanState) Next() []PlanState { return slices.Clone(planTransitions[s]) }

// CanBecome says whether a plan in state s may move to state to.
func (s PlanState) CanBecome(to PlanState) bool { return slices.Contains(planTransitions[s], to) }

// IsOpen says whether a plan in state s may still run.
func (s PlanState) IsOpen() bool {
	switch s {
	case PlanPlanned, PlanAwaitingApproval, PlanApproved:
		return true
	}
	return false
}

// IsSettled says whether a plan in state s will never change again but for
// its receipt id: it is neither open nor running.
func (s PlanState) IsSettled() bool {
	switch s {
	case PlanRunning, PlanPaused, PlanUnspecified:
		return false
	}
	return !s.IsOpen()
}

// IsFinal says whether s is the end of a plan that ran.
func (s PlanState) IsFinal() bool {
	switch s {
	case PlanSucceeded, PlanFailed, PlanTimedOut, PlanCancelled, PlanKilled, PlanOutcomeUnknown, PlanOutputLimit:
		return true
	}
	return false
}

// The plan states as the API spells them: the one conversion between the two.
var planStateProto = [nPlanStates]termdv1.PlanState{
	PlanUnspecified:      termdv1.PlanState_PLAN_STATE_UNSPECIFIED,
	PlanPlanned:          termdv1.PlanState_PLAN_STATE_PLANNED,
	PlanAwaitingApproval: termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL,
	PlanApproved:         termdv1.PlanState_PLAN_STATE_APPROVED,
	PlanDenied:           termdv1.PlanState_PLAN_STATE_DENIED,
	PlanBlocked:          termdv1.PlanState_PLAN_STATE_BLOCKED,
	PlanExpired:          termdv1.PlanState_PLAN_STATE_EXPIRED,
	PlanRunning:          termdv1.PlanState_PLAN_STATE_RUNNING,
	PlanPaused:           termdv1.PlanState_PLAN_STATE_PAUSED,
	PlanSucceeded:        termdv1.PlanState_PLAN_STATE_SUCCEEDED,
	PlanFailed:           termdv1.PlanState_PLAN_STATE_FAILED,
	PlanTimedOut:         termdv1.PlanState_PLAN_STATE_TIMED_OUT,
	PlanCancelled:        termdv1.PlanState_PLAN_STATE_CANCELLED,
	PlanKilled:           termdv1.PlanState_PLAN_STATE_KILLED,
	PlanOutcomeUnknown:   termdv1.PlanState_PLAN_STATE_OUTCOME_UNKNOWN,
	PlanOutputLimit:      termdv1.PlanState_PLAN_STATE_OUTPUT_LIMIT,
}

var planStateOfProto = func() map[termdv1.PlanState]PlanState {
	m := make(map[termdv1.PlanState]PlanState, nPlanStates)
	for s, p := range planStateProto {
		m[p] = PlanState(s)
	}
	return m
}()

// Proto is s as the API spells it (PLAN_STATE_UNSPECIFIED for PlanInvalid).
func (s PlanState) Proto() termdv1.PlanState {
	if s < 0 || s >= nPlanStates {
		return termdv1.PlanState_PLAN_STATE_UNSPECIFIED
	}
	return planStateProto[s]
}

// PlanStateOf is the API's plan state as a PlanState; PlanInvalid for a
// value the API does not define.
func PlanStateOf(p termdv1.PlanState) PlanState {
	if s, ok := planStateOfProto[p]; ok {
		return s
	}
	return PlanInvalid
}

// ExecState is where an execution is: running or paused, then how it
// ended.
type ExecState int

const (
	ExecUnspecified ExecState = iota
	ExecRunning
	ExecPaused
	ExecSucceeded
	ExecFailed
	ExecTimedOut
	ExecCancelled
	ExecKilled
	ExecOutcomeUnknown // termd stopped while it ran, or its receipt could not be stored
	ExecOutputLimit
	nExecStates
)

var execStateWords = [nExecStates]string{"unspecified", "running", "paused", "succeeded", "failed", "timed_out", "cancelled", "killed", "outcome_unknown", "output_limit"}

// String is the state as a word: "timed_out".
func (s ExecState) String() string {
	if s < 0 || s >= nExecStates {
		return fmt.Sprintf("invalid execution state (%d)", int(s))
	}
	return execStateWords[s]
}

// IsFinal says whether an execution in state s has ended.
func (s ExecState) IsFinal() bool { return s >= ExecSucceeded && s < nExecStates }

// PlanState is the state of the plan of an execution in state s: an
// execution's end is its plan's.
func (s ExecState) PlanState() PlanState {
	if s < 0 || s >= nExecStates {
		return PlanInvalid
	}
	return [nExecStates]PlanState{PlanUnspecified, PlanRunning, PlanPaused, PlanSucceeded, PlanFailed,
		PlanTimedOut, PlanCancelled, PlanKilled, PlanOutcomeUnknown, PlanOutputLimit}[s]
}

// The execution states as the API spells them: the one conversion between
// the two.
var execStateProto = [nExecStates]termdv1.ExecutionState{
	ExecUnspecified:    termdv1.ExecutionState_EXECUTION_STATE_UNSPECIFIED,
	ExecRunning:        termdv1.ExecutionState_EXECUTION_STATE_RUNNING,
	ExecPaused:         termdv1.ExecutionState_EXECUTION_STATE_PAUSED,
	ExecSucceeded:      termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED,
	ExecFailed:         termdv1.ExecutionState_EXECUTION_STATE_FAILED,
	ExecTimedOut:       termdv1.ExecutionState_EXECUTION_STATE_TIMED_OUT,
	ExecCancelled:      termdv1.ExecutionState_EXECUTION_STATE_CANCELLED,
	ExecKilled:         termdv1.ExecutionState_EXECUTION_STATE_KILLED,
	ExecOutcomeUnknown: termdv1.ExecutionState_EXECUTION_STATE_OUTCOME_UNKNOWN,
	ExecOutputLimit:    termdv1.ExecutionState_EXECUTION_STATE_OUTPUT_LIMIT,
}

// Proto is s as the API spells it (EXECUTION_STATE_UNSPECIFIED for a value
// out of range).
func (s ExecState) Proto() termdv1.ExecutionState {
	if s < 0 || s >= nExecStates {
		return termdv1.ExecutionState_EXECUTION_STATE_UNSPECIFIED
	}
	return execStateProto[s]
}

// ExecStateOf is the API's execution state as an ExecState; -1 for a value
// the API does not define.
func ExecStateOf(p termdv1.ExecutionState) ExecState {
	for s, q := range execStateProto {
		if q == p {
			return ExecState(s)
		}
	}
	return -1
}

// EndState is the final state of an execution that ended with status (the
// runner and the receipt spell it alike: "succeeded", "timed_out", …);
// false for a word that is no end.
func EndState(status string) (ExecState, bool) {
	for s := ExecSucceeded; s < nExecStates; s++ {
		if execStateWords[s] == status {
			return s, true
		}
	}
	return ExecUnspecified, false
}
