package runner

import (
	"errors"
	"os"
	"sync/atomic"
	"time"
)

// ErrNoTerminal is returned by the terminal calls of a Process that was not
// started with Spec.TTY (or has ended).
var ErrNoTerminal = errors.New("the execution has no terminal")

// terminal is a PTY execution's master side and its idle clock.
type terminal struct {
	master *os.File
	last   atomic.Int64 // unix nanos of the last output or input
	idle   atomic.Bool  // ended by the idle limit
}

func newTerminal(master *os.File) *terminal {
	t := &terminal{master: master}
	t.touch()
	return t
}

func (t *terminal) touch() { t.last.Store(time.Now().UnixNano()) }

// idleFor is how long nothing was read or written.
func (t *terminal) idleFor() time.Duration {
	return time.Since(time.Unix(0, t.last.Load()))
}

// activityReader marks output as activity for the idle clock.
type activityReader struct {
	f *os.File
	t *terminal
}

func (a activityReader) Read(b []byte) (int, error) {
	n, err := a.f.Read(b)
	if n > 0 {
		a.t.touch()
	}
	return n, err
}

// idleWatch returns a channel that fires when the terminal has been idle for
// limit, rechecking (not sleeping) when activity moved the deadline; nil when
// there is no limit. stop ends its goroutine.
func (t *terminal) idleWatch(limit time.Duration, stop <-chan struct{}) <-chan struct{} {
	if t == nil || limit <= 0 {
		return nil
	}
	fired := make(chan struct{})
	go func() {
		timer := time.NewTimer(limit)
		defer timer.Stop()
		for {
			select {
			case <-stop:
				return
			case <-timer.C:
				if d := t.idleFor(); d < limit {
					timer.Reset(limit - d)
					continue
				}
				close(fired)
				return
			}
		}
	}()
	return fired
}
