package mcpbridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// terminal_receipt: signed receipts, whole or in their share form.

// addReceiptTool adds terminal_receipt.
func (b *Bridge) addReceiptTool() {
	s := b.server
	addTool(s, &mcp.Tool{
		Name:        "terminal_receipt",
		Title:       "Signed receipt",
		Description: "A signed receipt: by receipt_id, or the latest of a session (default: this client's session).",
		Annotations: &mcp.ToolAnnotations{Title: "Signed receipt", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.receipt)
}

// ReceiptInput names a receipt.
type ReceiptInput struct {
	ReceiptID string `json:"receipt_id,omitempty" jsonschema:"a receipt id"`
	SessionID string `json:"session_id,omitempty" jsonschema:"the latest receipt of this session (default: this client's session)"`
	// Output is opt-in: a receipt keeps up to the output cap (1 MiB).
	IncludeOutput bool `json:"include_output,omitempty" jsonschema:"return the full receipt with stdout and stderr (can be large); default: the share form without output, which verifies just the same"`
}

func (b *Bridge) receipt(ctx context.Context, req *mcp.CallToolRequest, in ReceiptInput) (*mcp.CallToolResult, *ReceiptView, error) {
	r := &termdv1.GetReceiptRequest{ReceiptId: in.ReceiptID, SessionId: in.SessionID}
	if in.ReceiptID == "" && in.SessionID == "" {
		key, _ := b.clientKey(req)
		id, ok := b.sessions.lookup(key)
		if !ok {
			return nil, nil, errors.New("this conversation has run nothing yet, so it has no latest receipt. Next: pass a receipt_id (from terminal_execute or terminal_status) or a session_id")
		}
		r.SessionId = id
	}
	resp, err := b.c.Receipts.GetReceipt(ctx, r)
	if err != nil {
		return nil, nil, failure(err, "pass a receipt_id from a terminal_execute or terminal_status result")
	}
	s := resp.GetSummary()
	v := &ReceiptView{
		ReceiptID: s.GetId(),
		PlanID:    s.GetPlanId(),
		SessionID: s.GetSessionId(),
		Status:    s.GetStatus(),
		Command:   s.GetCommand(),
		ExitCode:  receiptExit(s.GetExitCode()),
		Receipt:   parseJSON(resp.GetReceiptJson()),
	}
	if !in.IncludeOutput {
		v.Receipt = b.sharedReceipt(ctx, s.GetId())
	}
	return reply(v, false, fmt.Sprintf("receipt %s: %s (%s) for %s", v.ReceiptID, v.Status, exitWords(s.GetExitCode()), v.Command))
}

// sharedReceipt is a receipt's share form: signed and verifiable, without
// the command's output (which the result already carries, bounded). The
// full receipt holds up to the output cap and would flood a model's context.
func (b *Bridge) sharedReceipt(ctx context.Context, id string) any {
	r, err := b.c.Receipts.ExportReceipt(ctx, &termdv1.ExportReceiptRequest{ReceiptId: id, Share: true})
	if err != nil {
		return nil
	}
	return parseJSON(r.GetReceiptJson())
}
