package executions

import (
	"errors"
	"strings"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/runner"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Control runs verb (pause, resume or cancel) on the process of running
// execution id, and returns the event that says it was done (none for a
// cancel: the execution's end says it).
func Control(proc *runner.Process, id, verb string) (termdv1.EventKind, error) {
	switch verb {
	case "pause":
		if err := proc.Pause(); err != nil {
			return 0, errdefs.Precondition("pausing execution %s: %v", id, err)
		}
		return termdv1.EventKind_EVENT_KIND_PAUSED, nil
	case "resume":
		if err := proc.Resume(); err != nil {
			return 0, errdefs.Precondition("resuming execution %s: %v", id, err)
		}
		return termdv1.EventKind_EVENT_KIND_RESUMED, nil
	case "cancel":
		if err := proc.Cancel(); err != nil && !errors.Is(err, runner.ErrFinished) && !errors.Is(err, runner.ErrStopping) {
			return 0, errdefs.Precondition("cancelling execution %s: %v", id, err)
		}
		return 0, nil
	}
	return 0, errdefs.Invalid("%s is not pause, resume or cancel", verb)
}

// NotRunning refuses verb on execution id, which is in state and no longer
// running.
func NotRunning(id string, state termdv1.ExecutionState, verb string) error {
	done := map[string]string{"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[verb]
	return errdefs.Precondition("execution %s is %s; only a running execution can be %s", id, execWord(state), done)
}

func execWord(s termdv1.ExecutionState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "EXECUTION_STATE_"))
}
