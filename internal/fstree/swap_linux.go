package fstree

import (
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Swapper exchanges two names (a directory and a symbolic link, say) with
// renameat2(RENAME_EXCHANGE) in a tight loop on a goroutine of its own: the
// racer of tests that prove work on a tree follows no link swapped in.
type Swapper struct {
	stop chan struct{}
	done chan struct{}
	n    atomic.Int64
	err  error
}

// Swap starts exchanging a and b; between (may be nil) runs after each swap.
func Swap(a, b string, between func()) *Swapper {
	s := &Swapper{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				s.err = err
				return
			}
			s.n.Add(1)
			if between != nil {
				between()
			}
		}
	}()
	return s
}

// Swaps is how many exchanges were made so far.
func (s *Swapper) Swaps() int64 { return s.n.Load() }

// Stop ends the loop and returns the number of exchanges and the error that
// ended it early, if any.
func (s *Swapper) Stop() (int64, error) {
	close(s.stop)
	<-s.done
	return s.n.Load(), s.err
}
