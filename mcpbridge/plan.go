package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/netmode"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// terminal_plan and terminal_retry: a command planned (decided, not run).

// addPlanTools adds terminal_plan and terminal_retry.
func (b *Bridge) addPlanTools() {
	s := b.server
	addTool(s, &mcp.Tool{
		Name:        "terminal_plan",
		Title:       "Plan a command",
		Description: "Plan a command without running it: the policy's decision (allow / ask / deny), risk, reasons, a preview and the next step; run it with terminal_execute. terminal_run does both in one call; plan first for a tty or to review.",
		Annotations: &mcp.ToolAnnotations{Title: "Plan a command", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, b.plan)
	addTool(s, &mcp.Tool{
		Name:        "terminal_retry",
		Title:       "Plan again",
		Description: "Plan the same request again (after a plan expired, went stale, or to run it once more); the policy decides afresh.",
		Annotations: &mcp.ToolAnnotations{Title: "Plan again", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, b.retry)
}

// CommandInput is the command terminal_plan and terminal_run take alike:
// what runs, where, and under which limits (termd's CommandRequest).
type CommandInput struct {
	Argv           []string          `json:"argv,omitempty" jsonschema:"the command as argv, e.g. [\"ls\",\"-la\"]; never run by a shell"`
	Command        string            `json:"command,omitempty" jsonschema:"or the command as one string, split like a shell would (quotes respected) but never run by one"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"working directory, absolute or relative to the workspace root (the default)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables (the policy decides)"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"kill it after this many seconds (default: the policy's limit)"`
	Sandbox        string            `json:"sandbox,omitempty" jsonschema:"read-only or workspace-write (default: the policy's choice; a program termd has no grammar for runs read-only: if it fails writing in the workspace, try again with workspace-write)"`
	Network        string            `json:"network,omitempty" jsonschema:"none, workspace-loopback (127.0.0.1 shared by your commands here, no route out: the default for offline work and curl to localhost), host (asks) or egress:NAME (an allow-list)"`
	Credentials    []string          `json:"credentials,omitempty" jsonschema:"names of operator-defined secrets (e.g. GH_TOKEN) to put in its environment (you never see the values); needs approval unless a grant covers it"`
	Stdin          string            `json:"stdin,omitempty" jsonschema:"text the command reads on its standard input (default: none); at most termd's plans.max_stdin_bytes (1 MiB)"`
}

// PlanInput asks for a plan.
type PlanInput struct {
	CommandInput
	SessionID string    `json:"session_id,omitempty" jsonschema:"a termd session to plan in (default: this client's session)"`
	TTY       *TTYInput `json:"tty,omitempty" jsonschema:"run the program on a pseudo-terminal of this size (an interactive program: a REPL, a prompt, less, git add -p); then type into it with terminal_send. A REPL needs a person's approval: what is typed into it is code"`
}

// RetryInput replans a plan.
type RetryInput struct {
	PlanID string `json:"plan_id" jsonschema:"the plan to plan again (after it expired, went stale, or finished)"`
}

func (b *Bridge) plan(ctx context.Context, req *mcp.CallToolRequest, in PlanInput) (*mcp.CallToolResult, *PlanView, error) {
	// Second round of a URL elicitation: the plan exists; report where it stands.
	if len(req.Params.InputResponses) > 0 && req.Params.RequestState != "" {
		p, err := b.c.Plan(ctx, req.Params.RequestState)
		if err != nil {
			return nil, nil, failure(err, "")
		}
		action := ""
		for _, r := range req.Params.InputResponses {
			if er, ok := r.(*mcp.ElicitResult); ok {
				action = er.Action
			}
		}
		return b.planResult(ctx, req, p, action, false)
	}
	cr, err := commandRequest(in.CommandInput, in.TTY)
	if err != nil {
		return nil, nil, err
	}
	p, err := b.createPlan(ctx, req, in.SessionID, cr)
	if err != nil {
		return nil, nil, err
	}
	return b.planResult(ctx, req, p, "", true)
}

// commandRequest checks a plan's arguments and builds its request.
func commandRequest(in CommandInput, ttyIn *TTYInput) (*termdv1.CommandRequest, error) {
	argv, command, err := splitCommand(in.Argv, in.Command)
	if err != nil {
		return nil, err
	}
	if in.TimeoutSeconds < 0 {
		return nil, errors.New("timeout_seconds must not be negative. Next: omit it for the policy's default")
	}
	switch in.Sandbox {
	case "", "read-only", "workspace-write":
	default:
		return nil, fmt.Errorf("sandbox %q is not a profile. Next: use read-only or workspace-write, or omit it", in.Sandbox)
	}
	if _, _, err := netmode.Parse(in.Network); err != nil {
		return nil, fmt.Errorf("%v. Next: omit network for the policy's choice", err)
	}
	tty, err := ttyOptions(ttyIn)
	if err != nil {
		return nil, err
	}
	return &termdv1.CommandRequest{Argv: argv, Command: command, Cwd: in.Cwd, Env: in.Env, TimeoutSeconds: uint32(in.TimeoutSeconds), Sandbox: in.Sandbox, Network: in.Network, Tty: tty, Credentials: in.Credentials, Stdin: []byte(in.Stdin)}, nil
}

// createPlan plans cr in the session asked for, or in this client's own.
// When this client's session has gone (expired, closed) or is full (it
// holds sessions.max_plans plans: all stateless HTTP clients share one),
// the plan is made once more in a fresh session; a full one is closed
// when nothing in it is pending, and otherwise left to expire, its plans
// still reachable by id.
func (b *Bridge) createPlan(ctx context.Context, req *mcp.CallToolRequest, asked string, cr *termdv1.CommandRequest) (*termdv1.Plan, error) {
	sid, pooled, err := b.session(ctx, req, asked)
	if err != nil {
		return nil, failure(err, "")
	}
	p, err := b.c.CreatePlan(ctx, sid, cr)
	if err != nil && pooled && (sessionGone(err) || sessionFull(err)) {
		full := sessionFull(err)
		b.sessions.forget(sid)
		if full {
			go func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				b.sessions.closeIfIdle(cctx, sid)
			}()
		}
		if sid, _, err = b.session(ctx, req, ""); err == nil {
			p, err = b.c.CreatePlan(ctx, sid, cr)
		}
	}
	if err != nil {
		return nil, failure(err, "")
	}
	return p, nil
}

// planResult reports a plan. A plan awaiting approval names the approve
// command and console page, and (once, when the client supports URL-mode
// elicitation and a console is configured) asks the person to approve there.
// The answer to that elicitation is never taken as an approval.
func (b *Bridge) planResult(ctx context.Context, req *mcp.CallToolRequest, p *termdv1.Plan, elicited string, mayElicit bool) (*mcp.CallToolResult, *PlanView, error) {
	v := planView(p, b.termctl())
	awaiting := p.GetState() == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL
	if awaiting {
		v.ApprovalURL = b.consoleURLFor(ctx, p.GetId())
		if v.ApprovalURL != "" {
			v.NextStep = fmt.Sprintf("this plan needs a person's approval: ask the user to run `%s` or to approve it at %s, then call terminal_execute with plan_id %q; you cannot approve it yourself", v.ApproveCommand, v.ApprovalURL, p.GetId())
			if mayElicit && supportsURLElicitation(req) {
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{
						"approval": &mcp.ElicitParams{
							Mode:          "url",
							Message:       fmt.Sprintf("termd needs your approval to run: %s (risk %s). Review and approve it in the termd console, or run `%s`.", strings.Join(p.GetDecision().GetArgv(), " "), v.Decision.Risk, v.ApproveCommand),
							URL:           v.ApprovalURL,
							ElicitationID: "approve-" + p.GetId(),
						},
					},
					RequestState: p.GetId(),
				}, nil, nil
			}
		}
		switch elicited {
		case "accept":
			v.NextStep += " (the user was shown the approval page)"
		case "decline", "cancel":
			v.NextStep += " (the user declined to open the approval page)"
		}
	}
	blocked := p.GetState() == termdv1.PlanState_PLAN_STATE_BLOCKED || p.GetState() == termdv1.PlanState_PLAN_STATE_DENIED
	summary := fmt.Sprintf("plan %s: %s", p.GetId(), v.State)
	if v.Decision != nil {
		summary += fmt.Sprintf(" (verdict %s, risk %s)", v.Decision.Verdict, v.Decision.Risk)
		if len(v.Decision.Reasons) > 0 {
			summary += "; reasons: " + strings.Join(v.Decision.Reasons, "; ")
		}
	}
	summary += ". Next: " + v.NextStep
	return reply(v, blocked, summary)
}

func supportsURLElicitation(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

func (b *Bridge) retry(ctx context.Context, req *mcp.CallToolRequest, in RetryInput) (*mcp.CallToolResult, *PlanView, error) {
	if in.PlanID == "" {
		return nil, nil, errors.New("plan_id is required. Next: pass the plan_id of an earlier terminal_plan result")
	}
	p, err := b.c.Replan(ctx, in.PlanID)
	if err != nil {
		return nil, nil, failure(err, "")
	}
	return b.planResult(ctx, req, p, "", true)
}
