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

	var (
		execID     string
		final      *termdv1.Execution
		receipt    *termdv1.ReceiptSummary
		gotEvent   bool
		wantCancel bool
		lagged     bool
	)
	cancelExec := func() {
		fmt.Fprintf(a.stderr, "termctl: cancelling execution %s (Ctrl-C again to stop waiting)\n", execID)
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, cerr := c.CancelExecution(cctx, execID)
		ccancel()
		if cerr != nil {
			fmt.Fprintf(a.stderr, "termctl: cancelling: %v\n", cerr)
		}
	}
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
				return exitWith(ExitCancelled, fmt.Errorf("stopped waiting; termd cancels execution %s as this termctl leaves", execID))
			}
			if execID == "" {
				wantCancel = true // cancel it as soon as it has an id
				continue
			}
			cancelExec()
		case ev := <-events:
			gotEvent = true
			switch ev.GetKind() {
			case termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED:
				if ex := ev.GetExecution(); ex != nil {
					execID = ex.Id
					if wantCancel {
						wantCancel = false
						cancelExec()
					}
				}
			case termdv1.EventKind_EVENT_KIND_OUTPUT:
				out := ev.GetOutput()
				if out == nil {
					continue
				}
				if execID == "" {
					execID = out.ExecutionId
					if wantCancel {
						wantCancel = false
						cancelExec()
					}
				}
				w := io.Writer(a.stdout)
				if out.Stream == termdv1.OutputStream_OUTPUT_STREAM_STDERR {
					w = a.stderr
				}
				if a.output != "table" {
					w = res.sink(out.Stream)
				}
				if _, err := w.Write(out.Data); err != nil && !errors.Is(err, syscall.EPIPE) {
					return err
				}
			case termdv1.EventKind_EVENT_KIND_LAGGED:
				// termd skipped this reader ahead: the session's commands
				// wrote more than its event ring holds before it read on.
				lagged = true
			case termdv1.EventKind_EVENT_KIND_PAUSED:
				if isTerminal(a.stderr) {
					fmt.Fprintln(a.stderr, "termctl: paused (termctl resume "+execID+")")
				}
			case termdv1.EventKind_EVENT_KIND_RESUMED:
				if isTerminal(a.stderr) {
					fmt.Fprintln(a.stderr, "termctl: resumed")
				}
			case termdv1.EventKind_EVENT_KIND_FINISHED:
				if ex := ev.GetExecution(); ex != nil {
					final = ex
					execID = ex.Id
				}
			case termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED:
				receipt = ev.GetReceipt()
			case termdv1.EventKind_EVENT_KIND_EGRESS_REFUSED:
				// On stderr as it happens: what the command could not reach.
				if r := ev.GetEgressRefused(); r != nil {
					fmt.Fprintf(a.stderr, "termctl: egress refused %s:%d (%s): %s\n", r.Host, r.Port, r.Reason, r.Detail)
				}
			}
		case err := <-errc:
			if !errors.Is(err, io.EOF) {
				if !gotEvent {
					return refusal(planID, err)
				}
				if final == nil {
					return exitWith(ExitRefused, fmt.Errorf("lost the stream of execution %s: %w; it may still be running: `termctl output %s` reads its output", execID, err, execID))
				}
			}
			if final == nil && execID != "" {
				// The stream ended without a final state: ask for it.
				gctx, gcancel := context.WithTimeout(context.Background(), 10*time.Second)
				got, gerr := c.Execution(gctx, execID)
				gcancel()
				if gerr == nil {
					final = got
				}
			}
			if final == nil {
				return exitWith(ExitRefused, fmt.Errorf("the execution stream of plan %s ended without a result: see `termctl receipts list`", planID))
			}
			if lagged {
				fmt.Fprintf(a.stderr, "termctl: this termctl fell behind termd's events (the session's commands wrote faster than it read) and some of the output was skipped here; `termctl output %s` reads what termd kept\n", final.Id)
			}
			res.Execution = final
			res.ReceiptID = final.ReceiptId
			if receipt != nil && receipt.Id != "" {
				res.ReceiptID = receipt.Id
			}
			return a.finish(final, receipt)
		}
	}
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
