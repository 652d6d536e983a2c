//go:build linux

package terminals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

var (
	agent    = &termdv1.Principal{Uid: 1000, Gid: 1000, Name: "agent", Role: termdv1.Role_ROLE_AGENT}
	operator = &termdv1.Principal{Uid: 0, Gid: 0, Name: "root", Role: termdv1.Role_ROLE_OPERATOR}
	other    = &termdv1.Principal{Uid: 1234, Gid: 1234, Name: "other", Role: termdv1.Role_ROLE_AGENT}
)

const session = "s-1"

// host is the broker's side for these tests: the hubs by execution id
// (a nil hub: an execution without a terminal), a real event bus, and the
// streams held open.
type host struct {
	bus     *events.Bus
	mu      sync.Mutex
	hubs    map[string]*Hub
	streams int
}

func (h *host) Find(_ *termdv1.Principal, id string) (*Hub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hub, ok := h.hubs[id]
	if !ok {
		return nil, errdefs.NotFound("execution %s not found", id)
	}
	return hub, nil
}

func (h *host) AcquireStream(*termdv1.Principal) (func(), error) {
	h.mu.Lock()
	h.streams++
	h.mu.Unlock()
	return func() { h.mu.Lock(); h.streams--; h.mu.Unlock() }, nil
}

func (h *host) Bus() *events.Bus { return h.bus }
func (h *host) Now() time.Time   { return time.Now() }

func (h *host) EventOf(ev *termdv1.Event, execID, planID string) bool {
	return ev.GetExecution().GetId() == execID || ev.GetReceipt().GetPlanId() == planID
}

// execution is a PTY execution's record as the broker would keep it.
type execution struct {
	mu       sync.Mutex
	e        *termdv1.Execution
	finished bool
}

func (x *execution) snapshot() (*termdv1.Execution, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return &termdv1.Execution{Id: x.e.Id, State: x.e.State, ReceiptId: x.e.ReceiptId}, x.finished
}

type rig struct {
	*host
	t *Terminals
}

func newRig(t *testing.T) *rig {
	h := &host{bus: events.New(events.Options{}), hubs: map[string]*Hub{}}
	h.bus.Publish(session, termdv1.EventKind_EVENT_KIND_SESSION_CREATED, nil)
	return &rig{host: h, t: New(h)}
}

var (
	runOnce sync.Once
	run     *runner.Runner
	runErr  error
)

// started is a program running on a hub's terminal.
type started struct {
	h    *Hub
	x    *execution
	proc *runner.Process
	id   string
}

// start runs argv on a new terminal of 20x60 that the agent requested.
func (r *rig) start(t *testing.T, id string, argv ...string) *started {
	t.Helper()
	runOnce.Do(func() { run, runErr = runner.NewWithOptions(runner.Options{NoCgroups: true}) })
	if runErr != nil {
		t.Fatalf("runner: %v", runErr)
	}
	term := &policy.Terminal{Rows: 20, Cols: 60}
	x := &execution{e: &termdv1.Execution{Id: id, State: termdv1.ExecutionState_EXECUTION_STATE_RUNNING}}
	h := r.t.NewHub(Exec{ID: id, PlanID: "p-" + id, SessionID: session, Requester: agent,
		Redactor: receiptstore.NewRedactor("s3cretvalue"), Snapshot: x.snapshot}, term, agent)
	proc, err := run.Start(runner.Spec{ID: id, Path: argv[0], Argv: argv, Timeout: time.Minute,
		Env:      []string{"PATH=/usr/bin:/bin", "TERM=" + TermName(term)},
		TTY:      &runner.TTY{Rows: term.Rows, Cols: term.Cols},
		OnOutput: func(_ runner.Stream, off int64, chunk []byte) { h.Feed(off, chunk) }})
	if err != nil {
		t.Fatal(err)
	}
	h.SetProcess(proc)
	r.mu.Lock()
	r.hubs[id] = h
	r.mu.Unlock()
	s := &started{h: h, x: x, proc: proc, id: id}
	t.Cleanup(func() { _ = proc.Cancel(); s.finish(r, "") })
	return s
}

// finish waits for the program, ends the hub and, with a receipt id,
// publishes the receipt as the broker does.
func (s *started) finish(r *rig, receiptID string) {
	res := s.proc.Wait()
	s.h.End()
	s.x.mu.Lock()
	if s.x.finished {
		s.x.mu.Unlock()
		return
	}
	s.x.finished = true
	s.x.e.State = termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED
	if res.Status != runner.StatusSucceeded {
		s.x.e.State = termdv1.ExecutionState_EXECUTION_STATE_FAILED
	}
	s.x.e.ReceiptId = receiptID
	s.x.mu.Unlock()
	if receiptID != "" {
		r.bus.Publish(session, termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED, func(ev *termdv1.Event) {
			ev.Payload = &termdv1.Event_Receipt{Receipt: &termdv1.ReceiptSummary{Id: receiptID, PlanId: "p-" + s.id}}
		})
	}
}

// screenWait waits (on the hub's change signal, not a sleep) until the
// screen text contains want.
func screenWait(t *testing.T, h *Hub, want string) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		ch := h.Changed()
		text := h.Text()
		if strings.Contains(text, want) {
			return text
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %q on the screen:\n%s", want, text)
		}
	}
}

func wantErr(t *testing.T, err error, kind errdefs.Kind, words string) {
	t.Helper()
	if err == nil || errdefs.KindOf(err) != kind || !strings.Contains(err.Error(), words) {
		t.Fatalf("want a %v error with %q, got %v", kind, words, err)
	}
}

func line(s string) *termdv1.TerminalInput {
	return &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Line{Line: s}}
}

func key(k termdv1.TerminalKey) *termdv1.TerminalInput {
	return &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Key{Key: k}}
}

// A REPL on a hub: input reaches the program, a send waits until it is
// ready for more, every input is recorded (redacted, with the digest of
// the bytes written) and published, and an ended terminal takes no input.
func TestHubSendInputWaitsAndRecords(t *testing.T) {
	r := newRig(t)
	sub, err := r.bus.Subscribe(session, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	s := r.start(t, "e-repl", "/usr/bin/python3", "-q")
	screenWait(t, s.h, ">>>")
	ctx := context.Background()
	got, err := r.t.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: s.id, Inputs: []*termdv1.TerminalInput{line("6*7  # s3cretvalue")}, Wait: &termdv1.WaitSpec{Wait: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Ready != termdv1.ReadyReason_READY_REASON_WAITING_FOR_INPUT || !strings.Contains(strings.Join(got.Screen.Lines, "\n"), "42\n>>>") || !strings.Contains(got.OutputText, "42") {
		t.Fatalf("send and wait: %s, screen %q, output %q", got.Ready, got.Screen.Lines, got.OutputText)
	}
	if strings.Contains(strings.Join(got.Screen.Lines, "\n")+got.OutputText, "s3cretvalue") {
		t.Fatalf("a secret reached the screen or output unredacted: %q %q", got.Screen.Lines, got.OutputText)
	}
	if got.Execution.GetInputHolder() != "agent" || got.Execution.GetTty().GetRows() != 20 {
		t.Fatalf("execution's terminal fields: %v", got.Execution)
	}
	// Up recalls the line (readline asked for application cursor keys).
	up, err := r.t.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: s.id, Inputs: []*termdv1.TerminalInput{key(termdv1.TerminalKey_TERMINAL_KEY_UP)}, Wait: &termdv1.WaitSpec{Wait: true}})
	if err != nil || !strings.Contains(strings.Join(up.Screen.Lines, "\n"), ">>> 6*7") {
		t.Fatalf("up arrow: %q %v", up.GetScreen().GetLines(), err)
	}
	// Ctrl-C drops the recalled line; Ctrl-D on the empty line ends python.
	for _, k := range []termdv1.TerminalKey{termdv1.TerminalKey_TERMINAL_KEY_CTRL_C, termdv1.TerminalKey_TERMINAL_KEY_CTRL_D} {
		if _, err := r.t.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: s.id, Inputs: []*termdv1.TerminalInput{key(k)}, Wait: &termdv1.WaitSpec{Wait: true}}); err != nil {
			t.Fatal(err)
		}
	}
	s.finish(r, "r-1")
	if st, _ := s.x.snapshot(); st.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("python did not end at ctrl-d: %s", st.State)
	}
	_, err = r.t.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: s.id, Inputs: []*termdv1.TerminalInput{line("1")}})
	wantErr(t, err, errdefs.KindPrecondition, "takes no more input")

	rc := s.h.Receipt()
	if rc.Rows != 20 || rc.Cols != 60 || len(rc.Inputs) != 4 {
		t.Fatalf("receipt terminal: %+v", rc)
	}
	first := rc.Inputs[0]
	sum := sha256.Sum256([]byte("6*7  # s3cretvalue\r"))
	if first.Kind != "input" || first.By != "agent" || strings.Contains(first.Text, "s3cretvalue") || !strings.HasPrefix(first.Text, "6*7  # ") || first.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("recorded input: %+v", first)
	}
	if rc.Inputs[1].Text != "<UP>" || rc.Inputs[2].Text != "<CTRL_C>" || rc.Inputs[3].Text != "<CTRL_D>" {
		t.Fatalf("recorded keys: %+v", rc.Inputs[1:])
	}
	var published []string
	for len(published) < 4 {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		ev, err := sub.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after %q: %v", published, err)
		}
		if te := ev.GetTerminal(); te != nil {
			if te.ExecutionId != s.id {
				t.Fatalf("terminal event of %q", te.ExecutionId)
			}
			published = append(published, te.Kind+" "+te.Text)
		}
	}
	if published[0] != "input "+first.Text || published[3] != "input <CTRL_D>" {
		t.Fatalf("published: %q", published)
	}
}

// Who may type, take, hand back and resize: the holder types, the
// requester or an operator takes (the requester not from an operator),
// the holder or an operator hands back, the holder or an operator resizes.
func TestHubInputHolder(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	s := r.start(t, "e-cat", "/bin/cat")
	_, err := r.t.TakeInput(ctx, other, s.id)
	wantErr(t, err, errdefs.KindPermission, "only its requester or an operator may take its input")
	if e, err := r.t.TakeInput(ctx, operator, s.id); err != nil || e.InputHolder != "root" {
		t.Fatalf("operator takes: %v %v", e, err)
	}
	_, err = r.t.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: s.id, Inputs: []*termdv1.TerminalInput{line("x")}})
	wantErr(t, err, errdefs.KindPermission, "held by root")
	_, err = r.t.TakeInput(ctx, agent, s.id)
	wantErr(t, err, errdefs.KindPermission, "cannot take it from an operator")
	_, err = r.t.ResizeTerminal(ctx, agent, s.id, &termdv1.TerminalOptions{Rows: 30, Cols: 100})
	wantErr(t, err, errdefs.KindPermission, "who sets its size")
	_, err = r.t.ReleaseInput(ctx, agent, s.id)
	wantErr(t, err, errdefs.KindPermission, "only its holder or an operator may hand it back to agent")
	_, err = r.t.ResizeTerminal(ctx, operator, s.id, &termdv1.TerminalOptions{Rows: 0, Cols: 100})
	wantErr(t, err, errdefs.KindInvalid, "rows and cols must be 1 to")
	if e, err := r.t.ResizeTerminal(ctx, operator, s.id, &termdv1.TerminalOptions{Rows: 30, Cols: 100}); err != nil || e.Tty.GetRows() != 30 || e.Tty.GetCols() != 100 {
		t.Fatalf("operator resizes: %v %v", e, err)
	}
	if sc, err := r.t.GetScreen(ctx, agent, &termdv1.GetScreenRequest{ExecutionId: s.id}); err != nil || sc.Screen.Rows != 30 || sc.Screen.Cols != 100 {
		t.Fatalf("screen after resize: %v %v", sc.GetScreen(), err)
	}
	if e, err := r.t.ReleaseInput(ctx, operator, s.id); err != nil || e.InputHolder != "agent" {
		t.Fatalf("operator hands back: %v %v", e, err)
	}
	if _, err := r.t.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: s.id, Inputs: []*termdv1.TerminalInput{line("typed again")}}); err != nil {
		t.Fatal(err)
	}
	screenWait(t, s.h, "typed again")
	var kinds []string
	for _, in := range s.h.Receipt().Inputs {
		kinds = append(kinds, in.Kind+":"+in.By+":"+in.Text)
	}
	if want := "input_taken:root:from agent resize:root:30x100 input_released:root:to agent input:agent:typed again<ENTER>"; strings.Join(kinds, " ") != want {
		t.Fatalf("recorded:\n%s\nwant\n%s", strings.Join(kinds, " "), want)
	}
}

// An attached client gets the screen, the output it asked to see again,
// new output and the execution's events up to its receipt; attaching to an
// ended terminal sends only the screen.
func TestAttachTerminalReplaysFollowsAndEnds(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	s := r.start(t, "e-attach", "/bin/cat")
	if _, err := r.t.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: s.id, Inputs: []*termdv1.TerminalInput{line("before")}}); err != nil {
		t.Fatal(err)
	}
	screenWait(t, s.h, "before")
	got := make(chan *termdv1.AttachTerminalResponse, 256)
	done := make(chan error, 1)
	go func() {
		done <- r.t.AttachTerminal(ctx, operator, &termdv1.AttachTerminalRequest{ExecutionId: s.id, SinceOffset: 0}, func(m *termdv1.AttachTerminalResponse) error {
			got <- m
			return nil
		})
	}()
	first, replay := <-got, <-got
	if !strings.Contains(strings.Join(first.GetScreen().GetLines(), "\n"), "before") {
		t.Fatalf("first message: %v", first)
	}
	if o := replay.GetOutput(); o.GetOffset() != 0 || !strings.Contains(string(o.GetData()), "before") {
		t.Fatalf("replay: %v", replay)
	}
	if _, err := r.t.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: s.id, Inputs: []*termdv1.TerminalInput{line("after")}}); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	for !strings.Contains(seen.String(), "after") {
		seen.Write((<-got).GetOutput().GetData())
	}
	if _, err := r.t.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: s.id, Inputs: []*termdv1.TerminalInput{key(termdv1.TerminalKey_TERMINAL_KEY_CTRL_D)}}); err != nil {
		t.Fatal(err)
	}
	s.finish(r, "r-attach")
	if err := <-done; err != nil {
		t.Fatalf("attach ended with %v", err)
	}
	close(got)
	var last *termdv1.AttachTerminalResponse
	for m := range got {
		last = m
	}
	if last.GetEvent().GetKind() != termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
		t.Fatalf("the last message is not the receipt: %v", last)
	}
	var n int
	err := r.t.AttachTerminal(ctx, operator, &termdv1.AttachTerminalRequest{ExecutionId: s.id, SinceOffset: -1}, func(m *termdv1.AttachTerminalResponse) error {
		if n++; m.GetScreen() == nil {
			t.Errorf("after the end, message %d is %v", n, m)
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("attaching after the end: %d messages, %v", n, err)
	}
	r.mu.Lock()
	streams := r.streams
	r.mu.Unlock()
	if streams != 0 {
		t.Fatalf("%d streams still counted after the attaches ended", streams)
	}
}

func TestAttachTerminalRefuses(t *testing.T) {
	r := newRig(t)
	r.hubs["plain"] = nil
	send := func(*termdv1.AttachTerminalResponse) error { return nil }
	err := r.t.AttachTerminal(context.Background(), agent, &termdv1.AttachTerminalRequest{ExecutionId: "plain"}, send)
	wantErr(t, err, errdefs.KindPrecondition, "has no terminal")
	err = r.t.AttachTerminal(context.Background(), agent, &termdv1.AttachTerminalRequest{ExecutionId: "plain", SinceOffset: -2}, send)
	wantErr(t, err, errdefs.KindInvalid, "since_offset -2")
	_, err = r.t.GetScreen(context.Background(), agent, &termdv1.GetScreenRequest{ExecutionId: "gone"})
	wantErr(t, err, errdefs.KindNotFound, "not found")
}

func TestEncodeInputs(t *testing.T) {
	raw, shown, err := encodeInputs([]*termdv1.TerminalInput{
		{Input: &termdv1.TerminalInput_Text{Text: "ls"}},
		line(" -l"),
		key(termdv1.TerminalKey_TERMINAL_KEY_UP),
		{Input: &termdv1.TerminalInput_Data{Data: []byte{0x03, 'a', 0x01, 0xff}}},
	}, false)
	if err != nil || string(raw) != "ls -l\r\x1b[A\x03a\x01\xff" || shown != "ls -l<ENTER><UP><CTRL_C>a<CTRL_A><0xff>" {
		t.Fatalf("encoded %q shown %q: %v", raw, shown, err)
	}
	if raw, _, _ := encodeInputs([]*termdv1.TerminalInput{key(termdv1.TerminalKey_TERMINAL_KEY_UP)}, true); string(raw) != "\x1bOA" {
		t.Fatalf("up with application cursor keys: %q", raw)
	}
	for _, c := range []struct {
		in    []*termdv1.TerminalInput
		words string
	}{
		{nil, "no input"},
		{[]*termdv1.TerminalInput{{}}, "input 1 is empty"},
		{[]*termdv1.TerminalInput{key(termdv1.TerminalKey(999))}, "not a key termd knows"},
		{[]*termdv1.TerminalInput{{Input: &termdv1.TerminalInput_Text{Text: strings.Repeat("x", maxInputBytes+1)}}}, fmt.Sprintf("more than %d bytes", maxInputBytes)},
	} {
		_, _, err := encodeInputs(c.in, false)
		wantErr(t, err, errdefs.KindInvalid, c.words)
	}
	if got := clipText("ééé", 3); got != "é… (6 bytes)" {
		t.Fatalf("clipText: %q", got)
	}
}
