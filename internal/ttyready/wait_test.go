package ttyready

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"testing"
	"time"
)

// fakeSource scripts a program for the wait logic's unit tests; the
// real-program tests (wait_linux_test.go) prove the probe itself.
type fakeSource struct {
	mu      sync.Mutex
	reading func(call int) bool // answer of the n-th Reading call
	calls   int
	seq     uint64
	text    string
	done    chan struct{}
}

func newFake() *fakeSource {
	return &fakeSource{reading: func(int) bool { return false }, done: make(chan struct{})}
}

func (f *fakeSource) Reading() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.reading(f.calls)
}

func (f *fakeSource) OutputSeq() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

func (f *fakeSource) Text() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.text
}

func (f *fakeSource) Done() <-chan struct{} { return f.done }

func (f *fakeSource) output(text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	f.text += text
}

func wait(t *testing.T, src Source, spec Spec) (Reason, time.Duration) {
	t.Helper()
	start := time.Now()
	r, err := Wait(context.Background(), src, spec)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return r, time.Since(start)
}

func TestWaitExited(t *testing.T) {
	f := newFake()
	f.reading = func(int) bool { return true }
	f.text = "match"
	close(f.done)
	if r, _ := wait(t, f, Spec{Pattern: regexp.MustCompile("match"), Quiet: time.Millisecond}); r != Exited {
		t.Fatalf("reason %q, want exited before anything else", r)
	}
	// Exiting during the wait ends it at once.
	f = newFake()
	go func() {
		time.Sleep(50 * time.Millisecond)
		close(f.done)
	}()
	if r, took := wait(t, f, Spec{Timeout: time.Minute, ProbeEvery: time.Hour}); r != Exited || took > 10*time.Second {
		t.Fatalf("reason %q after %v", r, took)
	}
}

func TestWaitPattern(t *testing.T) {
	f := newFake()
	f.text = "Password: "
	if r, _ := wait(t, f, Spec{Pattern: regexp.MustCompile(`(?m)^Password: $`)}); r != Pattern {
		t.Fatalf("pattern already on the screen: %q", r)
	}
	f = newFake()
	f.reading = func(n int) bool {
		if n == 5 {
			go f.output("Continue? [Y/n] ")
		}
		return false
	}
	if r, _ := wait(t, f, Spec{Pattern: regexp.MustCompile(`\[Y/n\]`)}); r != Pattern {
		t.Fatalf("pattern arriving later: %q", r)
	}
}

func TestWaitWaitingForInput(t *testing.T) {
	f := newFake()
	f.reading = func(int) bool { return true }
	r, took := wait(t, f, Spec{})
	if r != WaitingForInput || took < SettleNoOutput {
		t.Fatalf("reason %q after %v, want waiting_for_input after at least %v", r, took, SettleNoOutput)
	}
	// Once the program has answered, the shorter settle applies.
	f = newFake()
	f.reading = func(n int) bool {
		if n == 1 {
			f.seq++
		}
		return true
	}
	r, took = wait(t, f, Spec{})
	if r != WaitingForInput || took < Settle {
		t.Fatalf("reason %q after %v, want waiting_for_input after at least %v", r, took, Settle)
	}
	// Output arriving while the program reads (its prompt being drawn)
	// holds the answer back until it stops.
	f = newFake()
	f.reading = func(n int) bool {
		if n <= 10 {
			f.seq++ // called with f.mu held
		}
		return true
	}
	r, _ = wait(t, f, Spec{})
	if f.calls <= 10 || r != WaitingForInput {
		t.Fatalf("reason %q after %d probes, want waiting_for_input after output stopped", r, f.calls)
	}
	// Reading only now and then (between bursts of work) is not waiting.
	f = newFake()
	f.reading = func(n int) bool { return n%2 == 0 }
	if r, _ := wait(t, f, Spec{Timeout: 300 * time.Millisecond}); r != Timeout {
		t.Fatalf("flickering reading state gave %q, want timeout", r)
	}
}

func TestWaitQuietAndTimeout(t *testing.T) {
	f := newFake()
	r, took := wait(t, f, Spec{Quiet: 100 * time.Millisecond})
	if r != Quiet || took < 100*time.Millisecond {
		t.Fatalf("reason %q after %v", r, took)
	}
	// Output during the quiet time restarts it.
	f = newFake()
	f.reading = func(n int) bool {
		if n <= 10 {
			f.seq++
		}
		return false
	}
	if r, _ := wait(t, f, Spec{Quiet: 50 * time.Millisecond}); r != Quiet || f.calls <= 10 {
		t.Fatalf("reason %q after %d probes", r, f.calls)
	}
	f = newFake()
	r, took = wait(t, f, Spec{Timeout: 100 * time.Millisecond})
	if r != Timeout || took < 100*time.Millisecond {
		t.Fatalf("reason %q after %v", r, took)
	}
}

func TestWaitCancelled(t *testing.T) {
	f := newFake()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(30 * time.Millisecond)
		cancel()
	}()
	r, err := Wait(ctx, f, Spec{Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) || r != "" {
		t.Fatalf("reason %q, err %v", r, err)
	}
}
