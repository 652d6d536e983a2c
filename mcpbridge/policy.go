package mcpbridge

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/policyjson"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// terminal_policy_check: the policy's decision on a command, explained.

// addPolicyTool adds terminal_policy_check.
func (b *Bridge) addPolicyTool() {
	s := b.server
	addTool(s, &mcp.Tool{
		Name:        "terminal_policy_check",
		Title:       "Explain the policy",
		Description: "Explain what the policy would decide for a command and why, creating nothing.",
		Annotations: &mcp.ToolAnnotations{Title: "Explain the policy", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.check)
}

// CheckInput asks the policy about a command.
type CheckInput struct {
	Argv    []string `json:"argv,omitempty" jsonschema:"the command as argv"`
	Command string   `json:"command,omitempty" jsonschema:"the command as one string (never run by a shell)"`
	Cwd     string   `json:"cwd,omitempty" jsonschema:"working directory: absolute, or relative to the (first) workspace root"`
}

func (b *Bridge) check(ctx context.Context, req *mcp.CallToolRequest, in CheckInput) (*mcp.CallToolResult, *CheckView, error) {
	argv, command, err := splitCommand(in.Argv, in.Command)
	if err != nil {
		return nil, nil, err
	}
	resp, err := b.c.Policy.CheckPolicy(ctx, &termdv1.CheckPolicyRequest{Request: &termdv1.CommandRequest{Argv: argv, Command: command, Cwd: in.Cwd}})
	if err != nil {
		return nil, nil, failure(err, "")
	}
	d := resp.GetDecision()
	v := &CheckView{Decision: decisionView(d), CanonicalRequest: resp.GetCanonicalRequest()}
	if v.Decision == nil {
		v.Decision = &DecisionView{}
	}
	for _, st := range d.GetSteps() {
		v.Steps = append(v.Steps, policyjson.Step{Name: st.GetName(), Outcome: st.GetOutcome(), Detail: st.GetDetail()})
	}
	switch d.GetVerdict() {
	case termdv1.Verdict_VERDICT_ALLOW:
		v.NextStep = "terminal_plan then terminal_execute would run it without approval"
	case termdv1.Verdict_VERDICT_ASK:
		v.NextStep = "terminal_plan would create a plan that waits for a person's approval"
	default:
		v.NextStep = "the policy would refuse it; find another way (see reasons)"
	}
	summary := fmt.Sprintf("verdict %s, risk %s", v.Decision.Verdict, v.Decision.Risk)
	if len(v.Decision.Reasons) > 0 {
		summary += "; reasons: " + strings.Join(v.Decision.Reasons, "; ")
	}
	return reply(v, false, summary+". Next: "+v.NextStep)
}
