package cli_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// A foreground run whose reader falls behind its session's event ring until
// its own execution's end has left the ring (other runs of the same user
// kept writing: eight `termctl run -- yes` in one session) still returns,
// with its command's result and a note that output was skipped. Before,
// termd's ExecuteAndWait waited forever for the receipt event it had missed,
// and so did termctl.
func TestRunReturnsAfterFallingBehindItsSession(t *testing.T) {
	d := start(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	slow := exec.Command(harness.Bin(t, "termctl"), "run", "--", "yes")
	slow.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TERMD_SOCKET=" + d.Socket, "NO_COLOR=1"}
	slow.Dir = d.Workspace
	slow.Stdout = pw // nobody reads it yet: termctl blocks on its stdout and stops reading termd
	var mu sync.Mutex
	var stderr bytes.Buffer
	slow.Stderr = lockedWriter{&mu, &stderr}
	errOut := func() string { mu.Lock(); defer mu.Unlock(); return stderr.String() }
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = slow.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = slow.Process.Kill()
		<-done
	})
	// Its `yes` ends at the output budget while termctl is stuck.
	eventually(t, "the stalled run's receipt", func() bool { return len(receiptsWith(t, d, "output_limit")) == 1 })
	// A second run of the same user, in the same session, writes far more
	// than the session's event ring holds after the first one's end.
	second := exec.Command(harness.Bin(t, "termctl"), "run", "--", "yes")
	second.Env, second.Dir = slow.Env, slow.Dir
	var secondErr bytes.Buffer
	second.Stdout, second.Stderr = io.Discard, &secondErr
	if err := second.Run(); err != nil && !strings.Contains(secondErr.String(), "output budget") {
		t.Fatalf("the second run: %v\n%s", err, secondErr.String())
	}
	// Now the first termctl reads on: it must come back with its result.
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	select {
	case <-done:
		if ee, ok := waitErr.(*exec.ExitError); !ok || ee.ExitCode() != 141 {
			t.Fatalf("the stalled run should end with the output-limit exit code 141, got %v\n%s", waitErr, errOut())
		}
	case <-time.After(3 * time.Minute): // a hang guard, not a timing check
		t.Fatalf("termctl never returned after falling behind its session's events\n%s", errOut())
	}
	msg := errOut()
	if !strings.Contains(msg, "output budget") || !strings.Contains(msg, "receipt ") {
		t.Fatalf("the stalled run should report its final state and receipt, got:\n%s", msg)
	}
	if !strings.Contains(msg, "fell behind") || !strings.Contains(msg, "termctl output") {
		t.Fatalf("the stalled run should say that output was skipped and how to read what termd kept, got:\n%s", msg)
	}
}
