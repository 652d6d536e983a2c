package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/broker/sessions"
	"github.com/termd/termd/daemon/broker/terminals"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// screenWait waits (on the hub's change signal, not a sleep) until the
// screen text contains want.
func screenWait(t *testing.T, h *terminals.Hub, want string) string {
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

func TestTerminalREPLInProcess(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	s := r.session(t, agent)
	p, err := r.CreatePlan(ctx, agent, s, &termdv1.CommandRequest{Argv: []string{"python3", "-q"}, Cwd: r.ws, Tty: &termdv1.TerminalOptions{Rows: 20, Cols: 60}})
	if err != nil {
		t.Fatal(err)
	}
	if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || !strings.Contains(strings.Join(p.Decision.Reasons, ";"), "typed input is code") {
		t.Fatalf("a REPL plan: %s %q", p.State, p.Decision.Reasons)
	}
	if p.Decision.Tty.GetRows() != 20 || p.Request.Tty.GetCols() != 60 {
		t.Fatalf("terminal not echoed: %v %v", p.Decision.Tty, p.Request.Tty)
	}
	if _, err := r.ApprovePlan(ctx, operator, p.Id, p.Decision.RequestHash); err != nil {
		t.Fatal(err)
	}
	e, err := r.Execute(ctx, agent, p.Id, s)
	if err != nil {
		t.Fatal(err)
	}
	h, err := r.hubFor(agent, e.Id)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	screenWait(t, h, ">>>")
	t.Logf("prompt after %s", time.Since(t0))
	sent, err := r.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: e.Id, Inputs: []*termdv1.TerminalInput{{Input: &termdv1.TerminalInput_Line{Line: "6*7"}}}, Wait: &termdv1.WaitSpec{Wait: true}})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Ready != termdv1.ReadyReason_READY_REASON_WAITING_FOR_INPUT || !strings.Contains(strings.Join(sent.Screen.Lines, "\n"), "42\n>>>") || !strings.Contains(sent.OutputText, "42") {
		t.Fatalf("send and wait: %s, screen %q, output %q", sent.Ready, sent.Screen.Lines, sent.OutputText)
	}
	// Another agent cannot type, nor take the input.
	other := &termdv1.Principal{Uid: 1234, Gid: 1234, Name: "other", Role: termdv1.Role_ROLE_AGENT}
	if _, err := r.TakeInput(ctx, other, e.Id); err == nil {
		t.Fatal("another principal took the input")
	}
	// The operator takes over; the agent may then neither type nor take it back.
	if _, err := r.TakeInput(ctx, operator, e.Id); err != nil {
		t.Fatal(err)
	}
	_, err = r.SendInput(ctx, agent, &termdv1.SendInputRequest{ExecutionId: e.Id, Inputs: []*termdv1.TerminalInput{{Input: &termdv1.TerminalInput_Text{Text: "x"}}}})
	wantErr(t, err, anyKind, "held by root")
	_, err = r.TakeInput(ctx, agent, e.Id)
	wantErr(t, err, anyKind, "cannot take it from an operator")
	if _, err := r.SendInput(ctx, operator, &termdv1.SendInputRequest{ExecutionId: e.Id, Inputs: []*termdv1.TerminalInput{{Input: &termdv1.TerminalInput_Key{Key: termdv1.TerminalKey_TERMINAL_KEY_CTRL_D}}}}); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	done := r.execs[e.Id].done
	r.unlock()
	t1 := time.Now()
	<-done
	t.Logf("ended %s after ctrl-d", time.Since(t1))
	got, err := r.GetExecution(ctx, agent, e.Id)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := r.store.Get(got.ReceiptId)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Terminal == nil || len(rc.Terminal.Inputs) != 3 || rc.Terminal.Inputs[0].Text != "6*7<ENTER>" || rc.Terminal.Inputs[1].Kind != "input_taken" || rc.Terminal.Inputs[2].Text != "<CTRL_D>" {
		t.Fatalf("receipt terminal: %+v", rc.Terminal)
	}
}

// A PTY execution outlives the stream that started it: ExecuteAndWait's
// client going away does not cancel it, as it would a foreground command.
func TestTerminalOutlivesItsStream(t *testing.T) {
	r := newRig(t)
	s := r.session(t, operator)
	p, err := r.CreatePlan(context.Background(), operator, s, &termdv1.CommandRequest{Argv: []string{"python3", "-q"}, Cwd: r.ws, Mode: termdv1.Mode_MODE_TRUSTED, Tty: &termdv1.TerminalOptions{}})
	if err != nil || p.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("plan: %v %v", p.GetState(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- r.ExecuteAndWait(ctx, operator, p.Id, s, false, sessions.Each(func(ev *termdv1.Event) error {
			if ev.Kind == termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED {
				started <- ev.GetExecution().Id
			}
			return nil
		}))
	}()
	id := <-started
	cancel()
	<-done
	h, err := r.hubFor(operator, id)
	if err != nil {
		t.Fatal(err)
	}
	screenWait(t, h, ">>>")
	got, err := r.SendInput(context.Background(), operator, &termdv1.SendInputRequest{ExecutionId: id, Inputs: []*termdv1.TerminalInput{{Input: &termdv1.TerminalInput_Line{Line: "'still here'"}}}, Wait: &termdv1.WaitSpec{Wait: true}})
	if err != nil || !strings.Contains(strings.Join(got.Screen.Lines, "\n"), "'still here'\n>>>") {
		t.Fatalf("after the stream ended: %v %v", got.GetScreen().GetLines(), err)
	}
	// Up recalls the line (readline asked for application cursor keys).
	up, err := r.SendInput(context.Background(), operator, &termdv1.SendInputRequest{ExecutionId: id, Inputs: []*termdv1.TerminalInput{{Input: &termdv1.TerminalInput_Key{Key: termdv1.TerminalKey_TERMINAL_KEY_UP}}}, Wait: &termdv1.WaitSpec{Wait: true}})
	if err != nil || !strings.HasSuffix(strings.TrimSpace(strings.Join(up.Screen.Lines, "\n")), ">>> 'still here'") {
		t.Fatalf("up arrow: %q %v", up.GetScreen().GetLines(), err)
	}
	if _, err := r.CancelExecution(context.Background(), operator, id); err != nil {
		t.Fatal(err)
	}
}
