package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// follow runs a plan with ExecuteAndWait, copying its output live to the
// terminal's stdout and stderr, and returns an exitError carrying the
// command's exit code (0 → nil). Ctrl-C cancels the execution (it still gets
// a receipt); a second Ctrl-C stops waiting.
//
// With -o json|yaml the output is held in res instead (see runResult).
func (a *app) follow(ctx context.Context, c *client.Client, planID string, res *runResult) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Catch Ctrl-C before the execution can start, so it never goes unhandled.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stream, err := c.Executions.ExecuteAndWait(ctx, &termdv1.ExecuteAndWaitRequest{PlanId: planID})
	if err != nil {
		return refusal(planID, err)
	}
	f := &follower{a: a, c: c, planID: planID, res: res}
	events := make(chan *termdv1.Event)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case events <- m.GetEvent():
			case <-ctx.Done():
				return
			}
		}
	}()
	interrupts := 0
	for {
		select {
		case <-sigs:
			interrupts++
			if interrupts > 1 {
				return exitWith(ExitCancelled, fmt.Errorf("stopped waiting; termd cancels execution %s as this termctl leaves", f.execID))
			}
			if f.execID == "" {
				f.wantCancel = true // cancel it as soon as it has an id
				continue
			}
			f.cancelExec()
		case ev := <-events:
			if err := f.event(ev); err != nil {
				return err
			}
		case err := <-errc:
			return f.end(err)
		}
	}
}

// follower is what follow knows of the execution so far.
type follower struct {
	a      *app
	c      *client.Client
	planID string
	res    *runResult

	execID     string
	final      *termdv1.Execution
	receipt    *termdv1.ReceiptSummary
	gotEvent   bool
	wantCancel bool // Ctrl-C came before the execution had an id
	lagged     bool
}

func (f *follower) cancelExec() {
	fmt.Fprintf(f.a.stderr, "termctl: cancelling execution %s (Ctrl-C again to stop waiting)\n", f.execID)
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, cerr := f.c.CancelExecution(cctx, f.execID)
	ccancel()
	if cerr != nil {
		fmt.Fprintf(f.a.stderr, "termctl: cancelling: %v\n", cerr)
	}
}

// started records the execution's id, cancelling it if Ctrl-C came first.
func (f *follower) started(id string) {
	f.execID = id
	if f.wantCancel {
		f.wantCancel = false
		f.cancelExec()
	}
}

// event handles one event of the stream.
func (f *follower) event(ev *termdv1.Event) error {
	a := f.a
	f.gotEvent = true
	switch ev.GetKind() {
	case termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED:
		if ex := ev.GetExecution(); ex != nil {
			f.started(ex.Id)
		}
	case termdv1.EventKind_EVENT_KIND_OUTPUT:
		return f.output(ev.GetOutput())
	case termdv1.EventKind_EVENT_KIND_LAGGED:
		// termd skipped this reader ahead: the session's commands
		// wrote more than its event ring holds before it read on.
		f.lagged = true
	case termdv1.EventKind_EVENT_KIND_PAUSED:
		if isTerminal(a.stderr) {
			fmt.Fprintln(a.stderr, "termctl: paused (termctl resume "+f.execID+")")
		}
	case termdv1.EventKind_EVENT_KIND_RESUMED:
		if isTerminal(a.stderr) {
			fmt.Fprintln(a.stderr, "termctl: resumed")
		}
	case termdv1.EventKind_EVENT_KIND_FINISHED:
		if ex := ev.GetExecution(); ex != nil {
			f.final = ex
			f.execID = ex.Id
		}
	case termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED:
		f.receipt = ev.GetReceipt()
	case termdv1.EventKind_EVENT_KIND_EGRESS_REFUSED:
		// On stderr as it happens: what the command could not reach.
		if r := ev.GetEgressRefused(); r != nil {
			fmt.Fprintf(a.stderr, "termctl: egress refused %s:%d (%s): %s\n", r.Host, r.Port, r.Reason, r.Detail)
		}
	}
	return nil
}

// output copies a chunk of output to the terminal (or into res with -o).
func (f *follower) output(out *termdv1.OutputChunk) error {
	if out == nil {
		return nil
	}
	if f.execID == "" {
		f.started(out.ExecutionId)
	}
	w := io.Writer(f.a.stdout)
	if out.Stream == termdv1.OutputStream_OUTPUT_STREAM_STDERR {
		w = f.a.stderr
	}
	if f.a.output != "table" {
		w = f.res.sink(out.Stream)
	}
	if _, err := w.Write(out.Data); err != nil && !errors.Is(err, syscall.EPIPE) {
		return err
	}
	return nil
}

// end handles the end of the stream (err is io.EOF when it ended cleanly):
// it finds the final state and turns it into termctl's exit.
func (f *follower) end(err error) error {
	if !errors.Is(err, io.EOF) {
		if !f.gotEvent {
			return refusal(f.planID, err)
		}
		if f.final == nil {
			return exitWith(ExitRefused, fmt.Errorf("lost the stream of execution %s: %w; it may still be running: `termctl output %s` reads its output", f.execID, err, f.execID))
		}
	}
	if f.final == nil && f.execID != "" {
		// The stream ended without a final state: ask for it.
		gctx, gcancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, gerr := f.c.Execution(gctx, f.execID)
		gcancel()
		if gerr == nil {
			f.final = got
		}
	}
	if f.final == nil {
		return exitWith(ExitRefused, fmt.Errorf("the execution stream of plan %s ended without a result: see `termctl receipts list`", f.planID))
	}
	if f.lagged {
		fmt.Fprintf(f.a.stderr, "termctl: this termctl fell behind termd's events (the session's commands wrote faster than it read) and some of the output was skipped here; `termctl output %s` reads what termd kept\n", f.final.Id)
	}
	f.res.Execution = f.final
	f.res.ReceiptID = f.final.ReceiptId
	if f.receipt != nil && f.receipt.Id != "" {
		f.res.ReceiptID = f.receipt.Id
	}
	return f.a.finish(f.final, f.receipt)
}

// finish turns a final execution state into termctl's exit code.
func (a *app) finish(ex *termdv1.Execution, rc *termdv1.ReceiptSummary) error {
	receiptID := ex.ReceiptId
	if rc != nil && rc.Id != "" {
		receiptID = rc.Id
	}
	note := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if receiptID != "" {
			msg += "; receipt " + receiptID
		}
		fmt.Fprintln(a.stderr, "termctl:", msg)
	}
	switch ex.State {
	case termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED:
		if isTerminal(a.stderr) && receiptID != "" {
			fmt.Fprintln(a.stderr, a.color(a.stderr, "2", "receipt "+receiptID))
		}
		return nil
	case termdv1.ExecutionState_EXECUTION_STATE_FAILED:
		code := int(ex.ExitCode)
		if ex.Error != "" {
			note("the command did not start: %s", ex.Error)
			return exitWith(ExitNotStarted, nil)
		}
		if code <= 0 || code > 255 {
			return exitWith(ExitRefused, nil)
		}
		return commandExit(code)
	case termdv1.ExecutionState_EXECUTION_STATE_TIMED_OUT:
		note("the command timed out after %s", time.Duration(ex.DurationMs)*time.Millisecond)
		if strings.HasPrefix(ex.Error, "the terminal was idle") {
			note("%s", ex.Error)
		} else {
			note("give it longer: termctl run --timeout DURATION (e.g. --timeout 30m) -- COMMAND; at most the policy's limits.max_timeout")
		}
		return exitWith(ExitTimedOut, nil)
	case termdv1.ExecutionState_EXECUTION_STATE_CANCELLED:
		note("the command was cancelled")
		return exitWith(ExitCancelled, nil)
	case termdv1.ExecutionState_EXECUTION_STATE_KILLED:
		note("the command was killed%s", paren(ex.Signal))
		if n := signalNumber(ex.Signal); n > 0 {
			return exitWith(128+n, nil)
		}
		return exitWith(ExitRefused, nil)
	case termdv1.ExecutionState_EXECUTION_STATE_OUTPUT_LIMIT:
		note("%s", ex.Error)
		return exitWith(ExitOutputLimit, nil)
	case termdv1.ExecutionState_EXECUTION_STATE_OUTCOME_UNKNOWN:
		note("the outcome is unknown (termd was interrupted while it ran)")
		return exitWith(ExitRefused, nil)
	}
	note("execution %s ended in state %s", ex.Id, execStateWord(ex.State))
	return exitWith(ExitRefused, nil)
}

func signalNumber(name string) int {
	name = strings.ToUpper(strings.TrimSpace(name))
	if name == "" {
		return 0
	}
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	return int(unix.SignalNum(name))
}

// refusal maps termd refusing to run a plan (needs approval, blocked, stale,
// already ran, not yours) to exit code 125; other errors stay errors.
func refusal(planID string, err error) error {
	switch client.Code(err) {
	case codes.FailedPrecondition, codes.PermissionDenied, codes.Aborted:
		return exitWith(ExitRefused, fmt.Errorf("termd refused to run plan %s: %w", planID, err))
	}
	return fmt.Errorf("running plan %s: %w", planID, err)
}
