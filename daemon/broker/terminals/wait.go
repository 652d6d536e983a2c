package terminals

import (
	"context"
	"regexp"
	"time"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/internal/ttyready"
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

// readySource is what ttyready.Wait watches of one terminal: whether its
// foreground process reads it, its output counter, its screen, its end.
type readySource struct {
	h    *Hub
	proc *runner.Process
}

func (s readySource) Reading() bool {
	f := s.proc.Terminal()
	if f == nil {
		return false
	}
	reading, _, err := ttyready.ForegroundReading(f)
	return err == nil && reading
}

func (s readySource) OutputSeq() uint64 {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.h.seq
}

func (s readySource) Text() string {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.h.screen.Snapshot().Text()
}

func (s readySource) Done() <-chan struct{} { return s.proc.Done() }

var readyReasons = map[ttyready.Reason]termdv1.ReadyReason{
	ttyready.WaitingForInput: termdv1.ReadyReason_READY_REASON_WAITING_FOR_INPUT,
	ttyready.Quiet:           termdv1.ReadyReason_READY_REASON_QUIET,
	ttyready.Pattern:         termdv1.ReadyReason_READY_REASON_PATTERN,
	ttyready.Exited:          termdv1.ReadyReason_READY_REASON_EXITED,
	ttyready.Timeout:         termdv1.ReadyReason_READY_REASON_TIMEOUT,
}

// wait returns when the program is ready for more input, and why.
func (h *Hub) wait(ctx context.Context, proc *runner.Process, s readySpec) (termdv1.ReadyReason, error) {
	why, err := ttyready.Wait(ctx, readySource{h, proc}, ttyready.Spec{Timeout: s.Timeout, Quiet: s.Quiet, Pattern: s.Pattern})
	if err != nil {
		return 0, errdefs.Unavailable("waiting for execution %s to be ready: %v", h.x.ID, err)
	}
	r, ok := readyReasons[why]
	if !ok {
		return 0, errdefs.Internal("readiness probe returned an unknown reason %q", why)
	}
	return r, nil
}
