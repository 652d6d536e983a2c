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

// Defaults for a zero Spec, and the settle times: how long the program must
// have shown as reading, with no new output, before Wait believes it.
//
// Settle applies once output arrived during the wait: the program reacted
// (echoed, answered, drew its prompt), so it has taken the input, and 30 ms
// lets the rest of its prompt arrive. SettleNoOutput applies while nothing
// arrived: input written to the master reaches the program through a kernel
// work item, and until that runs the program still shows as blocked reading;
// on a busy machine that can take tens of milliseconds, so a wait that has
// seen no reaction holds on longer before it says "waiting_for_input".
const (
	DefaultTimeout    = 10 * time.Second
	DefaultProbeEvery = 15 * time.Millisecond
	Settle            = 30 * time.Millisecond
	SettleNoOutput    = 150 * time.Millisecond
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
// it (SettleNoOutput when no output arrived since the wait began); Quiet > 0 and there has been no output for Quiet (counted from the
// start of the wait or the last output); Timeout passed. A cancelled ctx
// returns its error. Reading and Text are called from Wait's goroutine only.
//
// Exited is reported when Done closes; the program's last output may still
// be on its way from the pty, so read the final screen after its output
// stream has ended.
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
	settle := SettleNoOutput
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
			settle = Settle
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
			if now.Sub(readingSince) >= settle && now.Sub(lastOut) >= settle {
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
