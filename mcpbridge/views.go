package mcpbridge

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/policyjson"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The views below are the tools' structured output. They are flat and named
// for the agent reading them; enums are lowercase words.

// DecisionView is the policy's decision on a request.
type DecisionView struct {
	Verdict       string            `json:"verdict" jsonschema:"allow (runs without approval), ask (needs a person's approval) or deny"`
	Risk          string            `json:"risk" jsonschema:"low, medium, high or critical"`
	Reasons       []string          `json:"reasons,omitempty" jsonschema:"why the policy decided so"`
	Rules         []string          `json:"rules,omitempty" jsonschema:"ids of the policy rules that matched"`
	Argv          []string          `json:"argv,omitempty" jsonschema:"the canonical argv"`
	ResolvedPath  string            `json:"resolved_path,omitempty" jsonschema:"absolute path of the program"`
	Cwd           string            `json:"cwd,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Mode          string            `json:"mode,omitempty" jsonschema:"inspect, confirm or trusted"`
	Network       bool              `json:"network,omitempty"`
	ReadOnly      bool              `json:"read_only,omitempty"`
	Writes        []string          `json:"writes,omitempty"`
	TimeoutSecs   uint32            `json:"timeout_seconds,omitempty"`
	PolicyVersion string            `json:"policy_version,omitempty"`
	RequestHash   string            `json:"request_hash,omitempty"`
	Sandbox       string            `json:"sandbox,omitempty" jsonschema:"how the kernel confines the command: read-only or workspace-write, network or not, and how fully this host enforces it"`
	Credentials   []string          `json:"credentials,omitempty" jsonschema:"names of the credentials the command receives (never values)"`
}

// PreviewView says what a plan would do.
type PreviewView struct {
	Program         string   `json:"program,omitempty"`
	Summary         string   `json:"summary,omitempty"`
	Writes          []string `json:"writes,omitempty"`
	Network         bool     `json:"network,omitempty"`
	RunsProjectCode bool     `json:"runs_project_code,omitempty"`
	ReadOnly        bool     `json:"read_only,omitempty"`
}

// PlanView is a plan as an agent needs it.
type PlanView struct {
	PlanID         string        `json:"plan_id"`
	SessionID      string        `json:"session_id"`
	State          string        `json:"state" jsonschema:"planned (ready to execute), awaiting_approval, approved, blocked (denied by policy), denied, expired, running, or a final state"`
	Decision       *DecisionView `json:"decision,omitempty"`
	Preview        *PreviewView  `json:"preview,omitempty"`
	NextStep       string        `json:"next_step" jsonschema:"what to do next"`
	ApproveCommand string        `json:"approve_command,omitempty" jsonschema:"the command a person runs to approve this plan"`
	ApprovalURL    string        `json:"approval_url,omitempty" jsonschema:"the console page where a person can approve this plan"`
	ExecutionID    string        `json:"execution_id,omitempty"`
	ReceiptID      string        `json:"receipt_id,omitempty"`
	ReplannedFrom  string        `json:"replanned_from,omitempty"`
}

// ExecutionView is an execution, with its receipt once it has one.
type ExecutionView struct {
	ExecutionID     string `json:"execution_id"`
	PlanID          string `json:"plan_id,omitempty"`
	SessionID       string `json:"session_id,omitempty"`
	State           string `json:"state" jsonschema:"running, paused, succeeded, failed, timed_out, cancelled, killed, output_limit (wrote more than the output budget) or outcome_unknown"`
	Done            bool   `json:"done" jsonschema:"true once the command has ended"`
	ExitCode        *int32 `json:"exit_code" jsonschema:"the command's exit code; null while it runs or when it has none (it did not start, or a signal ended it)"`
	Signal          string `json:"signal,omitempty"`
	DurationMs      int64  `json:"duration_ms,omitempty"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	OutputTruncated bool   `json:"output_truncated,omitempty"`
	Stdout          string `json:"stdout,omitempty" jsonschema:"output seen while waiting (bounded; page the rest with terminal_output)"`
	Stderr          string `json:"stderr,omitempty"`
	Error           string `json:"error,omitempty"`
	ReceiptID       string `json:"receipt_id,omitempty"`
	Receipt         any    `json:"receipt,omitempty" jsonschema:"the signed receipt once the command has ended, in its share form (no stdout/stderr; it verifies the same; terminal_receipt with include_output gives the full one)"`
	ResourceURI     string `json:"resource_uri,omitempty" jsonschema:"the execution as a resource: subscribe to it (resources/subscribe) to be notified when it ends"`
	// Terminal is set for a PTY execution (a plan made with tty).
	Terminal *TerminalView `json:"terminal,omitempty" jsonschema:"for a plan made with tty: the program's screen once it was ready for input; type with terminal_send"`
	NextStep string        `json:"next_step"`
}

// OutputView is one page of an execution's output.
type OutputView struct {
	ExecutionID string `json:"execution_id"`
	Stream      string `json:"stream" jsonschema:"stdout or stderr"`
	Offset      int64  `json:"offset"`
	NextOffset  int64  `json:"next_offset" jsonschema:"pass as offset to read on"`
	TotalBytes  int64  `json:"total_bytes" jsonschema:"bytes the stream has produced so far"`
	Data        string `json:"data"`
	More        bool   `json:"more" jsonschema:"true when more output is available now or may still come"`
	EOF         bool   `json:"eof" jsonschema:"true when the stream has ended and everything was read"`
	Truncated   bool   `json:"truncated,omitempty" jsonschema:"the daemon kept only part of the output (over its byte cap)"`
	NextStep    string `json:"next_step,omitempty"`
}

// ReceiptView is a signed receipt.
type ReceiptView struct {
	ReceiptID string `json:"receipt_id"`
	PlanID    string `json:"plan_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Status    string `json:"status"`
	Command   string `json:"command,omitempty"`
	ExitCode  *int32 `json:"exit_code" jsonschema:"the command's exit code; null when it has none (it did not start, or a signal ended it)"`
	Receipt   any    `json:"receipt" jsonschema:"the signed receipt (schema 1.0): the share form without output unless include_output was set"`
}

// CheckView is a policy explanation.
type CheckView struct {
	Decision         *DecisionView     `json:"decision"`
	Steps            []policyjson.Step `json:"steps,omitempty" jsonschema:"each check the policy made"`
	CanonicalRequest string            `json:"canonical_request,omitempty"`
	NextStep         string            `json:"next_step"`
}

// AdviceView is the adviser's text: data for the agent, never an action.
type AdviceView struct {
	Text        string           `json:"text"`
	Suggestions []SuggestionView `json:"suggestions,omitempty" jsonschema:"candidate commands; each must still go through terminal_plan"`
	Flagged     bool             `json:"flagged,omitempty"`
	Model       string           `json:"model,omitempty"`
	Warnings    []string         `json:"warnings,omitempty"`
}

// SuggestionView is one suggested command.
type SuggestionView struct {
	Argv    []string `json:"argv"`
	Purpose string   `json:"purpose,omitempty"`
}

func enumWord(s, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s, prefix))
}

func decisionView(d *termdv1.Decision) *DecisionView {
	if d == nil {
		return nil
	}
	return &DecisionView{
		Verdict:       enumWord(d.GetVerdict().String(), "VERDICT_"),
		Risk:          enumWord(d.GetRisk().String(), "RISK_"),
		Reasons:       d.GetReasons(),
		Rules:         d.GetRules(),
		Argv:          d.GetArgv(),
		ResolvedPath:  d.GetResolvedPath(),
		Cwd:           d.GetCwd(),
		Env:           d.GetEnv(),
		Mode:          enumWord(d.GetMode().String(), "MODE_"),
		Network:       d.GetNetwork(),
		ReadOnly:      d.GetReadOnly(),
		Sandbox:       client.SandboxWords(d.GetSandbox().GetProfile(), d.GetSandbox().GetNetworkMode(), d.GetSandbox().GetNetwork(), d.GetSandbox().GetEnforcement()),
		Writes:        d.GetWrites(),
		TimeoutSecs:   d.GetTimeoutSeconds(),
		PolicyVersion: d.GetPolicyVersion(),
		RequestHash:   d.GetRequestHash(),
		Credentials:   d.GetCredentials(),
	}
}

func planState(p *termdv1.Plan) string { return enumWord(p.GetState().String(), "PLAN_STATE_") }

// planView shows a plan to an agent; termctl is how the user runs termctl
// against this daemon ("termctl", or with --socket when it is not the
// default), for the approve command the agent passes on.
func planView(p *termdv1.Plan, termctl string) *PlanView {
	v := &PlanView{
		PlanID:        p.GetId(),
		SessionID:     p.GetSessionId(),
		State:         planState(p),
		Decision:      decisionView(p.GetDecision()),
		ExecutionID:   p.GetExecutionId(),
		ReceiptID:     p.GetReceiptId(),
		ReplannedFrom: p.GetReplannedFrom(),
	}
	if pr := p.GetPreview(); pr != nil {
		v.Preview = &PreviewView{
			Program:         pr.GetProgram(),
			Summary:         pr.GetSummary(),
			Writes:          pr.GetWrites(),
			Network:         pr.GetNetwork(),
			RunsProjectCode: pr.GetRunsProjectCode(),
			ReadOnly:        pr.GetReadOnly(),
		}
	}
	// ours is the full next step; hint is what to add to the daemon's own words.
	var ours, hint string
	switch p.GetState() {
	case termdv1.PlanState_PLAN_STATE_PLANNED, termdv1.PlanState_PLAN_STATE_APPROVED:
		// The daemon's words name termctl; an agent needs only the tool.
		ours = fmt.Sprintf("allowed: call terminal_execute with plan_id %q", p.GetId())
	case termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL:
		v.ApproveCommand = termctl + " approve " + p.GetId()
		ours = fmt.Sprintf("this plan needs a person's approval: ask the user to run `%s` (or approve it in the termd console), then call terminal_execute with plan_id %q; you cannot approve it yourself", v.ApproveCommand, p.GetId())
	case termdv1.PlanState_PLAN_STATE_BLOCKED, termdv1.PlanState_PLAN_STATE_DENIED:
		ours = "the policy will not run this command and it cannot be approved; do not retry it as is. Reach the goal another way (see reasons; terminal_policy_check explains a command without planning it)"
		hint = "do not retry it as is; terminal_policy_check explains a command without planning it"
	case termdv1.PlanState_PLAN_STATE_EXPIRED:
		ours = fmt.Sprintf("the plan expired; call terminal_retry with plan_id %q for a fresh one", p.GetId())
		hint = ours
	case termdv1.PlanState_PLAN_STATE_RUNNING, termdv1.PlanState_PLAN_STATE_PAUSED:
		ours = fmt.Sprintf("it is running: poll terminal_status with execution_id %q", p.GetExecutionId())
		hint = ours
	default:
		ours = "the plan has finished; read its receipt with terminal_receipt"
		hint = ours
	}
	v.NextStep = ours
	if d := p.GetNextStep(); d != "" && hint != "" {
		// The daemon's own words first; ours say which tool to call.
		v.NextStep = d + "; " + hint
	}
	return v
}

func execState(e *termdv1.Execution) string {
	return enumWord(e.GetState().String(), "EXECUTION_STATE_")
}

func execDone(e *termdv1.Execution) bool {
	switch e.GetState() {
	case termdv1.ExecutionState_EXECUTION_STATE_RUNNING, termdv1.ExecutionState_EXECUTION_STATE_PAUSED, termdv1.ExecutionState_EXECUTION_STATE_UNSPECIFIED:
		return false
	}
	return true
}

func executionView(e *termdv1.Execution) *ExecutionView {
	v := &ExecutionView{
		ExecutionID:     e.GetId(),
		PlanID:          e.GetPlanId(),
		SessionID:       e.GetSessionId(),
		State:           execState(e),
		Done:            execDone(e),
		Signal:          e.GetSignal(),
		DurationMs:      e.GetDurationMs(),
		StdoutBytes:     e.GetStdoutBytes(),
		StderrBytes:     e.GetStderrBytes(),
		OutputTruncated: e.GetOutputTruncated(),
		Error:           e.GetError(),
		ReceiptID:       e.GetReceiptId(),
	}
	if v.Done && e.GetSignal() == "" {
		code := e.GetExitCode()
		v.ExitCode = &code
	}
	switch {
	case !v.Done && e.GetState() == termdv1.ExecutionState_EXECUTION_STATE_PAUSED:
		v.NextStep = fmt.Sprintf("paused: terminal_resume or terminal_cancel with execution_id %q", e.GetId())
	case !v.Done:
		v.NextStep = fmt.Sprintf("still running: poll terminal_status with execution_id %q (and terminal_output for its output); terminal_cancel stops it", e.GetId())
	case v.ReceiptID != "":
		v.NextStep = "finished; the signed receipt is included (terminal_receipt fetches it again)"
	default:
		v.NextStep = "finished; the receipt is being signed: call terminal_status again shortly"
	}
	return v
}

// receiptExit is a receipt's exit code: receipts record -1 for none, MCP
// results say null, as terminal_execute and terminal_status do.
func receiptExit(code int32) *int32 {
	if code < 0 {
		return nil
	}
	return &code
}

// exitWords says a receipt's exit code in a sentence.
func exitWords(code int32) string {
	if code < 0 {
		return "no exit code"
	}
	return fmt.Sprintf("exit code %d", code)
}

// parseJSON turns a daemon JSON document into a value for structured
// content: the document as it came (a receipt is encoded as it is, not
// decoded into maps and encoded again), or its text when it is not JSON.
func parseJSON(s string) any {
	if s == "" {
		return nil
	}
	doc := json.RawMessage(s)
	if !json.Valid(doc) {
		return s
	}
	return doc
}
