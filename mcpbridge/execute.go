package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// terminal_execute, terminal_status and terminal_pause / resume / cancel:
// a plan run and its execution followed and controlled (terminal_list is in
// background.go, terminal_output in output.go).

// addExecutionTools adds terminal_execute, terminal_status, terminal_list,
// terminal_pause, terminal_resume and terminal_cancel.
func (b *Bridge) addExecutionTools() {
	s := b.server
	addTool(s, &mcp.Tool{
		Name:        "terminal_execute",
		Title:       "Run a plan",
		Description: "Run a plan by id (from terminal_plan or terminal_run, once approved). Streams output as progress notifications; returns state, exit code, output and receipt id when it ends within wait_seconds, else state running with an execution_id for terminal_status. background: true returns at once: then terminal_output, terminal_list, or subscribe to execution://ID.",
		Annotations: &mcp.ToolAnnotations{Title: "Run a plan", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, b.execute)
	addTool(s, &mcp.Tool{
		Name:        "terminal_status",
		Title:       "Execution status",
		Description: "State of an execution; once it has ended, includes its exit code and signed receipt.",
		Annotations: &mcp.ToolAnnotations{Title: "Execution status", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.status)
	addTool(s, &mcp.Tool{
		Name:        "terminal_list",
		Title:       "List executions",
		Description: "List this client's running (and paused) executions, e.g. those started with background: true; all: true adds those that have ended. Each has its output byte counts, so terminal_output from your last offset reads what is new.",
		Annotations: &mcp.ToolAnnotations{Title: "List executions", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.list)
	addTool(s, &mcp.Tool{
		Name:        "terminal_pause",
		Title:       "Pause an execution",
		Description: "Pause a running execution (SIGSTOP to its process group); terminal_resume continues it.",
		Annotations: &mcp.ToolAnnotations{Title: "Pause an execution", DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.control("pause"))
	addTool(s, &mcp.Tool{
		Name:        "terminal_resume",
		Title:       "Resume an execution",
		Description: "Resume a paused execution.",
		Annotations: &mcp.ToolAnnotations{Title: "Resume an execution", DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.control("resume"))
	addTool(s, &mcp.Tool{
		Name:        "terminal_cancel",
		Title:       "Cancel an execution",
		Description: "Cancel an execution: its processes are stopped and a receipt with status cancelled is signed.",
		Annotations: &mcp.ToolAnnotations{Title: "Cancel an execution", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.control("cancel"))
}

// ExecuteInput runs a plan.
type ExecuteInput struct {
	PlanID      string `json:"plan_id" jsonschema:"the plan to run, from terminal_plan"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the command to end before returning it as running (default 45, max 600)"`
	Background  bool   `json:"background,omitempty" jsonschema:"start it and return at once with its execution_id (no waiting, no output yet); read its output with terminal_output, list what runs with terminal_list, and subscribe to the result's resource_uri to be notified when it ends"`
	Detail      bool   `json:"detail,omitempty" jsonschema:"also return the signed receipt (share form)"`
}

// ExecutionInput names an execution, by its id or by the plan it runs.
type ExecutionInput struct {
	ExecutionID string `json:"execution_id,omitempty" jsonschema:"the execution, from terminal_execute"`
	PlanID      string `json:"plan_id,omitempty" jsonschema:"or the plan it runs (when no call returned its execution_id)"`
}

// executionID resolves an ExecutionInput to an execution id.
func (b *Bridge) executionID(ctx context.Context, in ExecutionInput) (string, error) {
	switch {
	case in.ExecutionID != "" && in.PlanID != "":
		return "", errors.New("give execution_id or plan_id, not both. Next: call the tool again with one of them")
	case in.ExecutionID != "":
		return in.ExecutionID, nil
	case in.PlanID == "":
		return "", errors.New("execution_id or plan_id is required. Next: pass the execution_id from terminal_execute, or the plan_id you executed")
	}
	p, err := b.c.Plan(ctx, in.PlanID)
	if err != nil {
		return "", failure(err, "pass a plan_id from terminal_plan")
	}
	if id := p.GetExecutionId(); id != "" {
		return id, nil
	}
	return "", fmt.Errorf("plan %s has not run (it is %s). Next: run it with terminal_execute", in.PlanID, planState(p))
}

func (b *Bridge) execute(ctx context.Context, req *mcp.CallToolRequest, in ExecuteInput) (*mcp.CallToolResult, *ExecutionView, error) {
	if in.PlanID == "" {
		return nil, nil, errors.New("plan_id is required. Next: call terminal_plan first and pass its plan_id")
	}
	wait := DefaultWait
	if in.WaitSeconds < 0 {
		return nil, nil, errors.New("wait_seconds must not be negative")
	}
	if in.Background && in.WaitSeconds > 0 {
		return nil, nil, errors.New("background returns at once, so wait_seconds does not apply. Next: give one of them")
	}
	if in.WaitSeconds > 0 {
		wait = min(time.Duration(in.WaitSeconds)*time.Second, MaxWait)
	}
	var w *watched
	var err error
	if in.Background {
		var res *mcp.CallToolResult
		var v *ExecutionView
		if res, v, err = b.startBackground(ctx, in.PlanID); err == nil {
			return res, v, nil
		}
	} else {
		w, err = b.run(ctx, req, in.PlanID, wait)
		if err == nil && w.exec.GetTty() != nil && !execDone(w.exec) {
			return b.startTerminal(ctx, w.exec, in.WaitSeconds)
		}
	}
	if err != nil {
		next := ""
		if client.Code(err) == codes.FailedPrecondition && strings.Contains(strings.ToLower(err.Error()), "approv") {
			next = fmt.Sprintf("ask the user to run `%s approve %s` (you cannot approve it), then call terminal_execute again", b.termctl(), in.PlanID)
		}
		return nil, nil, failure(err, next)
	}
	// The result is compact (as terminal_run's): state, exit code, ids,
	// output, links; the receipt only with detail.
	rv := &RunView{PlanID: in.PlanID}
	b.fillRun(ctx, rv, w, in.Detail)
	v := executionView(w.exec)
	v.Stdout, v.Stderr, v.Receipt = rv.Stdout, rv.Stderr, rv.Receipt
	if rv.NextStep != "" {
		v.NextStep = rv.NextStep
	} else {
		v.NextStep = "finished; terminal_receipt reads its signed receipt"
	}
	if !v.Done {
		v.ResourceURI = executionURI(v.ExecutionID)
	}
	res, _, _ := runReply(rv, false)
	if data, err := json.Marshal(v); err == nil {
		res.StructuredContent = json.RawMessage(data)
	}
	return res, v, nil
}

// capped collects output up to outputCap bytes.
type capped struct {
	b         strings.Builder
	truncated bool
}

func (c *capped) write(p []byte) {
	if c.truncated {
		return
	}
	if room := outputCap - c.b.Len(); len(p) > room {
		p = p[:room]
		c.truncated = true
	}
	c.b.Write(p)
}

func (c *capped) String() string {
	s := strings.ToValidUTF8(c.b.String(), "\uFFFD")
	if c.truncated {
		s += "\n[… more output: page it with terminal_output]"
	}
	return s
}

type watched struct {
	exec           *termdv1.Execution
	receipt        any
	stdout, stderr capped
}

// run starts a plan and follows its events until the receipt is signed or
// wait runs out, relaying output as progress notifications when the client
// asked for them. The execution is the daemon's: leaving early (wait spent,
// client gone) stops nothing; the agent polls it by id.
func (b *Bridge) run(ctx context.Context, req *mcp.CallToolRequest, planID string, wait time.Duration) (*watched, error) {
	w := &watched{}
	token := req.Params.GetProgressToken()
	var progress float64
	// notify relays an event; its message is built only when the client
	// asked for progress (most calls do not).
	notify := func(msg func() string) {
		if token == nil || req.Session == nil {
			return
		}
		progress++
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Message: msg()})
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var final *termdv1.Execution
	receiptID, shared := "", ""
	events := 0
	// With progress asked for, the events come live: the MCP client must
	// read each notification before the result (the TypeScript SDK drops a
	// progress notification it reads together with its call's result).
	live := token != nil && req.Session != nil
	stream, err := b.c.Executions.ExecuteAndWait(wctx, &termdv1.ExecuteAndWaitRequest{PlanId: planID, Detach: true, ShareReceipt: true, Live: live})
	// A PTY execution is followed only until it starts: the program waits
	// for input, which terminal_send types (the stream ending detaches).
	for err == nil && w.exec.GetTty() == nil {
		var m *termdv1.ExecuteAndWaitResponse
		if m, err = stream.Recv(); err != nil {
			break
		}
		events++
		ev := m.GetEvent()
		switch ev.GetKind() {
		case termdv1.EventKind_EVENT_KIND_OUTPUT:
			o := ev.GetOutput()
			if o.GetStream() == termdv1.OutputStream_OUTPUT_STREAM_STDERR {
				w.stderr.write(o.GetData())
			} else {
				w.stdout.write(o.GetData())
			}
			notify(func() string { return strings.ToValidUTF8(string(o.GetData()), "\uFFFD") })
		case termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED, termdv1.EventKind_EVENT_KIND_PAUSED, termdv1.EventKind_EVENT_KIND_RESUMED:
			w.exec = ev.GetExecution()
			e := w.exec
			notify(func() string { return fmt.Sprintf("execution %s %s", e.GetId(), execState(e)) })
		case termdv1.EventKind_EVENT_KIND_FINISHED:
			final = ev.GetExecution()
			w.exec = final
			notify(func() string { return fmt.Sprintf("execution %s %s", final.GetId(), execState(final)) })
		case termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED:
			receiptID, shared = ev.GetReceipt().GetId(), m.GetShareReceiptJson()
		case termdv1.EventKind_EVENT_KIND_EGRESS_REFUSED:
			r := ev.GetEgressRefused()
			notify(func() string {
				return fmt.Sprintf("egress refused %s:%d (%s): %s", r.GetHost(), r.GetPort(), r.GetReason(), r.GetDetail())
			})
		}
	}
	if cancelledByClient(ctx) {
		return nil, b.cancelRun(ctx, planID, w.exec.GetId())
	}
	if err != nil && !errors.Is(err, io.EOF) && wctx.Err() == nil && events == 0 {
		return nil, err // refused: not approved, blocked, stale, ...
	}
	// Use a fresh context: wait may be spent, but the answer should be current.
	qctx, qcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer qcancel()
	if w.exec == nil {
		// Nothing arrived in time: find the execution through its plan.
		p, perr := b.c.Plan(qctx, planID)
		if perr != nil {
			return nil, perr
		}
		if p.GetExecutionId() == "" {
			return nil, fmt.Errorf("plan %s did not start within %s (state %s)", planID, wait, planState(p))
		}
		w.exec = &termdv1.Execution{Id: p.GetExecutionId(), PlanId: planID, State: termdv1.ExecutionState_EXECUTION_STATE_RUNNING}
	}
	if final == nil || (receiptID == "" && final.GetReceiptId() == "") {
		if g, gerr := b.c.Execution(qctx, w.exec.GetId()); gerr == nil {
			w.exec = g
		}
	}
	if receiptID == "" {
		receiptID = w.exec.GetReceiptId()
	}
	if receiptID != "" && execDone(w.exec) {
		if w.exec.GetReceiptId() == "" {
			w.exec.ReceiptId = receiptID
		}
		if shared != "" {
			w.receipt = parseJSON(shared) // came with the final event
		} else {
			w.receipt = b.sharedReceipt(qctx, receiptID)
		}
	}
	return w, nil
}

// cancelledByClient reports whether the client cancelled the tool call
// (notifications/cancelled, or closing a stateless HTTP request): the SDK
// cancels the call's context without a cause. A disconnected stdio client
// or a closing server is not a cancellation (MCP: disconnection SHOULD NOT
// be read as one): those commands keep running, as with wait_seconds spent.
func cancelledByClient(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled)
}

// cancelRun cancels the execution of a terminal_execute call its client
// cancelled, so it ends "cancelled" with a signed receipt instead of
// running to its timeout.
func (b *Bridge) cancelRun(ctx context.Context, planID, execID string) error {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if execID == "" {
		// Started, but its id had not arrived: find it through the plan.
		for range 20 {
			p, err := b.c.Plan(qctx, planID)
			if err != nil {
				return err
			}
			if execID = p.GetExecutionId(); execID != "" {
				break
			}
			if s := p.GetState(); s != termdv1.PlanState_PLAN_STATE_PLANNED && s != termdv1.PlanState_PLAN_STATE_APPROVED {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if execID == "" {
		return fmt.Errorf("terminal_execute of plan %s was cancelled before it started", planID)
	}
	if _, err := b.c.CancelExecution(qctx, execID); err != nil && client.Code(err) != codes.FailedPrecondition {
		b.log.Warn("cancelling the execution of a cancelled call", "execution", execID, "err", err)
		return err
	}
	return fmt.Errorf("terminal_execute was cancelled: execution %s was cancelled", execID)
}

func (b *Bridge) status(ctx context.Context, req *mcp.CallToolRequest, in ExecutionInput) (*mcp.CallToolResult, *ExecutionView, error) {
	id, err := b.executionID(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	ex, err := b.c.Execution(ctx, id)
	if err != nil {
		return nil, nil, failure(err, "")
	}
	v := executionView(ex)
	v.ResourceURI = executionURI(v.ExecutionID)
	if v.Done && v.ReceiptID != "" {
		v.Receipt = b.sharedReceipt(ctx, v.ReceiptID)
	}
	summary := fmt.Sprintf("execution %s: %s", v.ExecutionID, v.State)
	if v.ExitCode != nil {
		summary += fmt.Sprintf(", exit code %d", *v.ExitCode)
	}
	return reply(v, false, summary+". Next: "+v.NextStep)
}

func (b *Bridge) control(action string) mcp.ToolHandlerFor[ExecutionInput, *ExecutionView] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in ExecutionInput) (*mcp.CallToolResult, *ExecutionView, error) {
		id, err := b.executionID(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		var ex *termdv1.Execution
		switch action {
		case "pause":
			ex, err = b.c.PauseExecution(ctx, id)
		case "resume":
			ex, err = b.c.ResumeExecution(ctx, id)
		case "cancel":
			ex, err = b.c.CancelExecution(ctx, id)
		}
		if err != nil {
			return nil, nil, failure(err, "check its state with terminal_status")
		}
		v := executionView(ex)
		return reply(v, false, fmt.Sprintf("execution %s: %s. Next: %s", v.ExecutionID, v.State, v.NextStep))
	}
}
