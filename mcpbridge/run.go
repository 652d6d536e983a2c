package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// terminal_run: one call per command. The bridge plans the command and,
// when the policy allows it, runs that plan in the same call; inside termd
// nothing changes (CreatePlan, then ExecuteAndWait of the plan id: the same
// canonical request, request hash and receipt as terminal_plan followed by
// terminal_execute). A plan that needs a person's approval comes back with
// its plan_id and how to get it approved; the agent runs it later with
// terminal_execute.
//
// Its result is compact: state, exit code, the output (bounded), the ids,
// and resource links to the execution and the receipt. The decision and the
// signed receipt come only with detail (or from terminal_receipt).

// RunInput asks for a command to be planned and, if allowed, run.
type RunInput struct {
	CommandInput
	WaitSeconds int  `json:"wait_seconds,omitempty" jsonschema:"wait this long for it to end before returning it as running (default 45, max 600)"`
	Detail      bool `json:"detail,omitempty" jsonschema:"also return the policy decision and the signed receipt"`
}

// RunView is a terminal_run result (and its structuredContent).
type RunView struct {
	State        string   `json:"state" jsonschema:"succeeded, failed, timed_out, cancelled, killed, output_limit, running; or awaiting_approval or blocked (nothing ran)"`
	ExitCode     *int32   `json:"exit_code,omitempty"`
	Signal       string   `json:"signal,omitempty"`
	Stdout       string   `json:"stdout,omitempty" jsonschema:"bounded; next_step says where to read more"`
	Stderr       string   `json:"stderr,omitempty"`
	PlanID       string   `json:"plan_id"`
	ExecutionID  string   `json:"execution_id,omitempty"`
	ReceiptID    string   `json:"receipt_id,omitempty"`
	ExecutionURI string   `json:"execution_uri,omitempty"`
	ReceiptURI   string   `json:"receipt_uri,omitempty"`
	Risk         string   `json:"risk,omitempty"`
	Reasons      []string `json:"reasons,omitempty"`
	ApprovalURL  string   `json:"approval_url,omitempty"`
	ApproveCmd   string   `json:"approve_command,omitempty"`
	NextStep     string   `json:"next_step,omitempty"`
	Decision     any      `json:"decision,omitempty" jsonschema:"with detail: the policy's decision, as terminal_plan gives it"`
	Receipt      any      `json:"receipt,omitempty" jsonschema:"with detail: the signed receipt (share form, no output)"`
}

func (b *Bridge) addRunTool() {
	addTool(b.server, &mcp.Tool{
		Name:        "terminal_run",
		Title:       "Run a command",
		Description: "Run a command under termd's policy in one call: it is planned and, if allowed, run; returns its state, exit code, output and receipt id. If it needs a person's approval, returns the plan_id and how to get it approved; then run it with terminal_execute.",
		Annotations: &mcp.ToolAnnotations{Title: "Run a command", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, b.runCommand)
}

func (b *Bridge) runCommand(ctx context.Context, req *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, *RunView, error) {
	if in.WaitSeconds < 0 {
		return nil, nil, errors.New("wait_seconds must not be negative. Next: omit it to wait up to 45 s")
	}
	cr, err := commandRequest(in.CommandInput, nil)
	if err != nil {
		return nil, nil, err
	}
	p, err := b.createPlan(ctx, req, "", cr)
	if err != nil {
		return nil, nil, err
	}
	v := &RunView{PlanID: p.GetId(), State: planState(p)}
	if in.Detail {
		if d := decisionView(p.GetDecision()); d != nil {
			v.Decision = d
		}
	}
	switch p.GetState() {
	case termdv1.PlanState_PLAN_STATE_PLANNED, termdv1.PlanState_PLAN_STATE_APPROVED:
	case termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL:
		v.Risk, v.Reasons = enumWord(p.GetDecision().GetRisk().String(), "RISK_"), p.GetDecision().GetReasons()
		v.ApproveCmd = b.termctl() + " approve " + p.GetId()
		v.ApprovalURL = b.consoleURLFor(ctx, p.GetId())
		where := "with `" + v.ApproveCmd + "`"
		if v.ApprovalURL != "" {
			where = "in the console at " + v.ApprovalURL + " or " + where
		}
		v.NextStep = fmt.Sprintf("a person must approve it %s (you cannot); then call terminal_execute with plan_id %s", where, p.GetId())
		return runReply(v, false)
	default: // blocked, denied: the policy refuses it
		v.Risk, v.Reasons = enumWord(p.GetDecision().GetRisk().String(), "RISK_"), p.GetDecision().GetReasons()
		v.NextStep = "it cannot be approved: do not retry it as is; reach the goal another way (terminal_policy_check explains a command)"
		return runReply(v, true)
	}
	wait := DefaultWait
	if in.WaitSeconds > 0 {
		wait = min(time.Duration(in.WaitSeconds)*time.Second, MaxWait)
	}
	w, err := b.run(ctx, req, p.GetId(), wait)
	if err != nil {
		return nil, nil, failure(err, "")
	}
	b.fillRun(ctx, v, w, in.Detail)
	return runReply(v, false)
}

// fillRun puts an execution followed by run into v: state, exit code,
// bounded output and where to read the rest, ids and links.
func (b *Bridge) fillRun(ctx context.Context, v *RunView, w *watched, detail bool) {
	e := w.exec
	v.State, v.ExecutionID, v.ReceiptID = execState(e), e.GetId(), e.GetReceiptId()
	v.ExecutionURI = executionURI(v.ExecutionID)
	if v.ReceiptID != "" {
		v.ReceiptURI = receiptPrefix + v.ReceiptID
	}
	if execDone(e) && e.GetSignal() == "" {
		code := e.GetExitCode()
		v.ExitCode = &code
	}
	v.Signal = e.GetSignal()
	v.Stdout, v.Stderr = w.stdout.b.String(), w.stderr.b.String()
	v.Stdout, v.Stderr = strings.ToValidUTF8(v.Stdout, "\uFFFD"), strings.ToValidUTF8(v.Stderr, "\uFFFD")
	var next []string
	if !execDone(e) {
		next = append(next, fmt.Sprintf("still running: terminal_status with execution_id %s, or subscribe to %s", v.ExecutionID, v.ExecutionURI))
	}
	for _, s := range []struct {
		name  string
		c     *capped
		total int64
	}{{"stdout", &w.stdout, e.GetStdoutBytes()}, {"stderr", &w.stderr, e.GetStderrBytes()}} {
		if n := int64(s.c.b.Len()); s.c.truncated || (execDone(e) && s.total > n) {
			next = append(next, fmt.Sprintf("%s shows %d of %d bytes: terminal_output with execution_id %s, stream %s, offset %d reads on", s.name, n, s.total, v.ExecutionID, s.name, n))
		}
	}
	v.NextStep = strings.Join(next, "; ")
	if detail {
		v.Receipt = w.receipt
		if v.Receipt == nil && v.ReceiptID != "" {
			v.Receipt = b.sharedReceipt(ctx, v.ReceiptID)
		}
	}
}

// runReply renders a RunView: one short text (what happened, the ids,
// the next step, then the output), resource links to the execution and
// the receipt, and the view as structuredContent. The decision and
// receipt (detail) are in structuredContent only.
func runReply(v *RunView, isError bool) (*mcp.CallToolResult, *RunView, error) {
	var t strings.Builder
	t.WriteString(strings.ReplaceAll(v.State, "_", " "))
	switch {
	case v.ExitCode != nil:
		fmt.Fprintf(&t, ", exit %d", *v.ExitCode)
	case v.Signal != "":
		t.WriteString(", " + v.Signal)
	}
	if v.Risk != "" {
		t.WriteString(" (risk " + v.Risk + ")")
	}
	if len(v.Reasons) > 0 {
		t.WriteString(": " + strings.Join(v.Reasons, "; "))
	}
	if v.ExecutionID != "" {
		t.WriteString("; execution " + v.ExecutionID)
	} else {
		t.WriteString("; plan " + v.PlanID)
	}
	if v.ReceiptID != "" {
		t.WriteString(", receipt " + v.ReceiptID)
	}
	if v.NextStep != "" {
		t.WriteString(". Next: " + v.NextStep)
	}
	t.WriteByte('\n')
	if v.Stdout != "" {
		t.WriteString(v.Stdout)
	}
	if v.Stderr != "" {
		t.WriteString("[stderr]\n" + v.Stderr)
	}
	content := []mcp.Content{&mcp.TextContent{Text: t.String()}}
	if v.ExecutionURI != "" {
		content = append(content, &mcp.ResourceLink{URI: v.ExecutionURI, Name: "execution"})
	}
	if v.ReceiptURI != "" {
		content = append(content, &mcp.ResourceLink{URI: v.ReceiptURI, Name: "receipt"})
	}
	res := &mcp.CallToolResult{Content: content, IsError: isError}
	if data, err := json.Marshal(v); err == nil {
		res.StructuredContent = json.RawMessage(data)
	}
	return res, v, nil
}
