package broker

import (
	"context"
	"regexp"
	"time"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/runner"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Wait bounds of SendInput.
const (
	defaultWaitTimeout = 10 * time.Second
	maxWaitTimeout     = 300 * time.Second
)

// readySpec is a checked WaitSpec.
type readySpec struct {
	Timeout, Quiet time.Duration
	Pattern        *regexp.Regexp
}

// waitSpec checks a WaitSpec (nil: no wait).
func waitSpec(w *termdv1.WaitSpec) (readySpec, error) {
	var s readySpec
	if !w.GetWait() {
		return s, nil
	}
	s.Timeout = time.Duration(w.GetTimeoutMs()) * time.Millisecond
	switch {
	case s.Timeout == 0:
		s.Timeout = defaultWaitTimeout
	case s.Timeout > maxWaitTimeout:
		return s, errdefs.Invalid("wait timeout_ms %d: at most %d", w.GetTimeoutMs(), maxWaitTimeout.Milliseconds())
	}
	s.Quiet = time.Duration(w.GetQuietMs()) * time.Millisecond
	if p := w.GetPattern(); p != "" {
		re, err := regexp.Compile(p)
		if err != nil {
			return s, errdefs.Invalid("wait pattern %q is not a regular expression (RE2): %v", p, err)
		}
		s.Pattern = re
	}
	return s, nil
}

// wait returns when the program is ready for more input.
func (h *termHub) wait(ctx context.Context, proc *runner.Process, s readySpec) (termdv1.ReadyReason, error) {
	return 0, errdefs.Unavailable("waiting for readiness is not built yet (internal/ttyready); send without wait and read the screen")
}
