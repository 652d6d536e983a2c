package executions_test

import (
	"strings"
	"testing"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Pause, resume and cancel act on a real running command and name the
// event that says so; a cancelled command ends cancelled. An execution
// that no longer runs is refused in words naming its state.
func TestControlPausesResumesAndCancels(t *testing.T) {
	r := newLaunchRig(t)
	d := policy.Decision{Argv: []string{"sleep", "60"}, ResolvedPath: "/bin/sleep", Cwd: r.ws}
	proc := r.spawn(t, &executions.Setup{Redactor: r.Redactor}, d, "c1")
	for verb, want := range map[string]termdv1.EventKind{"pause": termdv1.EventKind_EVENT_KIND_PAUSED, "resume": termdv1.EventKind_EVENT_KIND_RESUMED} {
		if kind, err := executions.Control(proc, "c1", verb); err != nil || kind != want {
			t.Fatalf("%s: %v, %v; want %v", verb, kind, err, want)
		}
	}
	if _, err := executions.Control(proc, "c1", "pause"); err != nil {
		t.Fatal(err)
	}
	if kind, err := executions.Control(proc, "c1", "cancel"); err != nil || kind != 0 {
		t.Fatalf("cancel while paused: %v, %v", kind, err)
	}
	if res := proc.Wait(); res.Status != runner.StatusCancelled {
		t.Fatalf("a cancelled command ended %s", res.Status)
	}
	if _, err := executions.Control(proc, "c1", "cancel"); err != nil {
		t.Fatalf("cancelling a command that has ended: %v", err)
	}
	if _, err := executions.Control(proc, "c1", "pause"); errdefs.KindOf(err) != errdefs.KindPrecondition || !strings.Contains(err.Error(), "pausing execution c1") {
		t.Fatalf("pausing a command that has ended: %v", err)
	}
	err := executions.NotRunning("c1", termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED, "resume")
	if errdefs.KindOf(err) != errdefs.KindPrecondition || err.Error() != "execution c1 is succeeded; only a running execution can be resumed" {
		t.Fatalf("NotRunning: %v", err)
	}
}

// ReadOutput checks the request before it looks the execution up, serves a
// running command's output redacted and without its unfinished last line,
// a finished one's from its receipt (kept bytes, total, truncation), and
// one without a receipt by its counts alone.
func TestReadOutputLiveAndFromReceipt(t *testing.T) {
	r := newLaunchRig(t)
	never := func() (executions.Output, error) {
		t.Fatal("looked up for a bad request")
		return executions.Output{}, nil
	}
	for _, bad := range []*termdv1.ReadOutputRequest{{Stream: 9}, {Offset: -1}} {
		if _, err := executions.ReadOutput(bad, never, nil); errdefs.KindOf(err) != errdefs.KindInvalid {
			t.Errorf("request %v: %v", bad, err)
		}
	}
	d := policy.Decision{Argv: []string{"sh", "-c", "printf 'one secret-x1\\ntwo\\npartial'"}, ResolvedPath: "/bin/sh", Cwd: r.ws}
	s := &executions.Setup{Redactor: receiptstore.NewRedactor().With("secret-x1")}
	proc := r.spawn(t, s, d, "o1")
	if res := proc.Wait(); res.Status != runner.StatusSucceeded {
		t.Fatalf("the command ended %s", res.Status)
	}
	live := func() (executions.Output, error) {
		return executions.Output{Proc: proc, Exec: &termdv1.Execution{}, Redactor: s.Redactor}, nil
	}
	all, err := executions.ReadOutput(&termdv1.ReadOutputRequest{ExecutionId: "o1"}, live, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := string(all.Data)
	if strings.Contains(text, "secret-x1") || !strings.HasPrefix(text, "one ") || !strings.HasSuffix(text, "\ntwo\n") || all.Eof || all.Truncated ||
		all.KeptBytes != int64(len(text)) || all.TotalBytes != int64(len("one secret-x1\ntwo\npartial")) {
		t.Errorf("live output %q (%+v): want it redacted, up to its last whole line, not the end", text, all)
	}
	got, err := executions.ReadOutput(&termdv1.ReadOutputRequest{ExecutionId: "o1", Offset: 2, Limit: 3}, live, nil)
	if err != nil || string(got.Data) != text[2:5] || got.NextOffset != 5 || got.Eof {
		t.Errorf("live read at 2, 3 bytes: %+v, %v; want %q", got, err, text[2:5])
	}
	rc := &receipt.Receipt{Stdout: "kept", StdoutBytes: 10, Stderr: "", StderrBytes: 0}
	stored := func(id string) (*receipt.Receipt, error) {
		if id != "r1" {
			t.Fatalf("receipt %q read, want r1", id)
		}
		return rc, nil
	}
	done := func() (executions.Output, error) {
		return executions.Output{ReceiptID: "r1", Exec: &termdv1.Execution{}}, nil
	}
	got, err = executions.ReadOutput(&termdv1.ReadOutputRequest{ExecutionId: "o1", Offset: 1}, done, stored)
	if err != nil || string(got.Data) != "ept" || !got.Eof || !got.Truncated || got.TotalBytes != 10 || got.KeptBytes != 4 {
		t.Errorf("from the receipt: %+v, %v", got, err)
	}
	gone := func() (executions.Output, error) {
		return executions.Output{Finished: true, Exec: &termdv1.Execution{StderrBytes: 5}}, nil
	}
	got, err = executions.ReadOutput(&termdv1.ReadOutputRequest{Stream: termdv1.OutputStream_OUTPUT_STREAM_STDERR}, gone, nil)
	if err != nil || len(got.Data) != 0 || !got.Eof || !got.Truncated || got.TotalBytes != 5 {
		t.Errorf("without a receipt: %+v, %v", got, err)
	}
}
