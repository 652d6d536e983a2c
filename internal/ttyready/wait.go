package ttyready

import (
	"context"
	"regexp"
	"time"
)

// Reason says why Wait returned.
type Reason string

const (
	WaitingForInput Reason = "waiting_for_input" // the program is blocked reading its terminal
	Quiet           Reason = "quiet"             // no output for Spec.Quiet
	Pattern         Reason = "pattern"           // Spec.Pattern matched the text
	Exited          Reason = "exited"            // the program ended
	Timeout         Reason = "timeout"           // Spec.Timeout passed first
)

// Defaults for a zero Spec, and the settle time: how long the program must
// have shown as reading, with no new output, before Wait believes it. It
// lets the prompt's own output arrive, and covers the moment after input is
// written when the program has not yet been woken to read it.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultProbeEvery = 15 * time.Millisecond
	Settle            = 30 * time.Millisecond
)

// Spec is what a wait waits for.
type Spec struct {
	Timeout    time.Duration  // 0: DefaultTimeout
	Quiet      time.Duration  // 0: not used (300ms is a good value for callers)
	Pattern    *regexp.Regexp // nil: not used; matched against Source.Text
	ProbeEvery time.Duration  // 0: DefaultProbeEvery
}

// Source is the program being waited on.
type Source interface {
	Reading() bool         // e.g. ForegroundReading on its pty master
	OutputSeq() uint64     // increases whenever output arrives
	Text() string          // the text Pattern is matched against (e.g. the screen)
	Done() <-chan struct{} // closed when the program exited
}

// Wait returns as soon as one of these holds, checked in this order: the
// program exited; Pattern matches Text (already at the start, too); the
// program has been reading its terminal for Settle with no output during
// it; Quiet > 0 and there has been no output for Quiet (counted from the
// start of the wait or the last output); Timeout passed. A cancelled ctx
// returns its error. Reading and Text are called from Wait's goroutine only.
func Wait(ctx context.Context, src Source, spec Spec) (Reason, error) {
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	every := spec.ProbeEvery
	if every <= 0 {
		every = DefaultProbeEvery
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	ticker := time.NewTicker(every)
	defer ticker.Stop()

	start := time.Now()
	lastSeq := src.OutputSeq()
	lastOut := start
	var readingSince time.Time
	checkPattern := spec.Pattern != nil
	for {
		select {
		case <-src.Done():
			return Exited, nil
		default:
		}
		now := time.Now()
		if seq := src.OutputSeq(); seq != lastSeq {
			lastSeq, lastOut = seq, now
			checkPattern = spec.Pattern != nil
		}
		if checkPattern {
			if spec.Pattern.MatchString(src.Text()) {
				return Pattern, nil
			}
			checkPattern = false
		}
		if src.Reading() {
			if readingSince.IsZero() {
				readingSince = now
			}
			if now.Sub(readingSince) >= Settle && now.Sub(lastOut) >= Settle {
				return WaitingForInput, nil
			}
		} else {
			readingSince = time.Time{}
		}
		if spec.Quiet > 0 && now.Sub(lastOut) >= spec.Quiet {
			return Quiet, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-src.Done():
			return Exited, nil
		case <-timer.C:
			return Timeout, nil
		case <-ticker.C:
		}
	}
}
