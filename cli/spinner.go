package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// isTerminal reports whether w is a terminal (an *os.File on a tty).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// spin shows a spinner with msg on stderr while the caller waits, only when
// stderr is a terminal (never in scripts or pipes). Call the returned
// function to stop it; it clears the line.
func (a *app) spin(msg string) (stop func()) {
	if !isTerminal(a.stderr) {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
		if a.noColor {
			frames = []string{"|", "/", "-", `\`}
		}
		// Wait a moment so fast answers do not flicker.
		select {
		case <-done:
			return
		case <-time.After(150 * time.Millisecond):
		}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(a.stderr, "\r%s %s", frames[i%len(frames)], msg)
			select {
			case <-done:
				fmt.Fprint(a.stderr, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// color wraps s in an ANSI colour when w is a terminal and colour is on.
func (a *app) color(w io.Writer, code, s string) string {
	if a.noColor || !isTerminal(w) || s == "" {
		return s
	}
	return "\033[" + code + "m" + s + "\033[0m"
}

// verdictColor colours a verdict word: green allow, yellow ask, red deny.
func (a *app) verdictColor(w io.Writer, v string) string {
	switch v {
	case "allow":
		return a.color(w, "32", v)
	case "ask":
		return a.color(w, "33", v)
	case "deny":
		return a.color(w, "31", v)
	}
	return v
}
