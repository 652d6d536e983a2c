package client

import (
	"context"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Typed calls: the unary calls termctl, termd-mcp and termd doctor make
// over and over, taking ids and returning the object asked for, so that a
// client does not wrap requests and unwrap responses itself. Streams and
// calls made once stay on the generated clients (Client.Plans, …); errors
// are the same *Error either way.

// Status is DaemonService.GetStatus.
func (c *Client) Status(ctx context.Context) (*termdv1.GetStatusResponse, error) {
	return c.Daemon.GetStatus(ctx, &termdv1.GetStatusRequest{})
}

// Version is DaemonService.GetVersion.
func (c *Client) Version(ctx context.Context) (*termdv1.GetVersionResponse, error) {
	return c.Daemon.GetVersion(ctx, &termdv1.GetVersionRequest{})
}

// Plan returns the plan id.
func (c *Client) Plan(ctx context.Context, id string) (*termdv1.Plan, error) {
	r, err := c.Plans.GetPlan(ctx, &termdv1.GetPlanRequest{PlanId: id})
	return r.GetPlan(), err
}

// CreatePlan decides req and records it as a plan in the session.
func (c *Client) CreatePlan(ctx context.Context, sessionID string, req *termdv1.CommandRequest) (*termdv1.Plan, error) {
	r, err := c.Plans.CreatePlan(ctx, &termdv1.CreatePlanRequest{SessionId: sessionID, Request: req})
	return r.GetPlan(), err
}

// Replan plans plan id's request again.
func (c *Client) Replan(ctx context.Context, id string) (*termdv1.Plan, error) {
	r, err := c.Plans.Replan(ctx, &termdv1.ReplanRequest{PlanId: id})
	return r.GetPlan(), err
}

// Execution returns the execution id.
func (c *Client) Execution(ctx context.Context, id string) (*termdv1.Execution, error) {
	r, err := c.Executions.GetExecution(ctx, &termdv1.GetExecutionRequest{ExecutionId: id})
	return r.GetExecution(), err
}

// PauseExecution stops execution id's process group (SIGSTOP).
func (c *Client) PauseExecution(ctx context.Context, id string) (*termdv1.Execution, error) {
	r, err := c.Executions.PauseExecution(ctx, &termdv1.PauseExecutionRequest{ExecutionId: id})
	return r.GetExecution(), err
}

// ResumeExecution continues a paused execution.
func (c *Client) ResumeExecution(ctx context.Context, id string) (*termdv1.Execution, error) {
	r, err := c.Executions.ResumeExecution(ctx, &termdv1.ResumeExecutionRequest{ExecutionId: id})
	return r.GetExecution(), err
}

// CancelExecution cancels execution id.
func (c *Client) CancelExecution(ctx context.Context, id string) (*termdv1.Execution, error) {
	r, err := c.Executions.CancelExecution(ctx, &termdv1.CancelExecutionRequest{ExecutionId: id})
	return r.GetExecution(), err
}

// Session returns the session id.
func (c *Client) Session(ctx context.Context, id string) (*termdv1.Session, error) {
	r, err := c.Sessions.GetSession(ctx, &termdv1.GetSessionRequest{SessionId: id})
	return r.GetSession(), err
}

// CreateSession opens a session with a label.
func (c *Client) CreateSession(ctx context.Context, label string) (*termdv1.Session, error) {
	r, err := c.Sessions.CreateSession(ctx, &termdv1.CreateSessionRequest{Label: label})
	return r.GetSession(), err
}

// Receipt returns receipt id, its summary and its JSON.
func (c *Client) Receipt(ctx context.Context, id string) (*termdv1.GetReceiptResponse, error) {
	return c.Receipts.GetReceipt(ctx, &termdv1.GetReceiptRequest{ReceiptId: id})
}

// LintPolicy checks a policy text as termd would load it, reporting
// problems against name; it installs nothing.
func (c *Client) LintPolicy(ctx context.Context, name string, text []byte) (*termdv1.LintPolicyResponse, error) {
	return c.Policy.LintPolicy(ctx, &termdv1.LintPolicyRequest{Name: name, Text: string(text)})
}
