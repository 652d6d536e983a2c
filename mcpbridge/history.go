package mcpbridge

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// HistoryInput searches the receipts this principal may see.
type HistoryInput struct {
	Query     string `json:"query" jsonschema:"the phrase to find in commands, decision reasons and (redacted) output: literal text, case-insensitive; quotes, OR, NEAR, * and - are searched for as written"`
	SessionID string `json:"session_id,omitempty" jsonschema:"only this session's receipts"`
	Status    string `json:"status,omitempty" jsonschema:"only this status: succeeded, failed, timed_out, cancelled, killed, output_limit, denied, blocked, expired, outcome_unknown"`
	Principal string `json:"principal,omitempty" jsonschema:"only receipts this principal requested or approved (e.g. uid:1000)"`
	Since     string `json:"since,omitempty" jsonschema:"only receipts that started from then on: a duration ago (24h) or a time (2026-01-02, RFC 3339)"`
	Until     string `json:"until,omitempty" jsonschema:"only receipts that started before then (same forms as since)"`
	Limit     int32  `json:"limit,omitempty" jsonschema:"hits per page: 20 by default, at most 100"`
	PageToken string `json:"page_token,omitempty" jsonschema:"next_page_token of the previous page"`
}

// HistoryHit is one receipt the phrase occurs in.
type HistoryHit struct {
	ReceiptID string `json:"receipt_id" jsonschema:"read it with terminal_receipt"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Command   string `json:"command"`
	StartedAt string `json:"started_at"`
	ExitCode  *int32 `json:"exit_code" jsonschema:"null when the command has none"`
	Field     string `json:"field" jsonschema:"where the phrase is: command, output or reasons"`
	Snippet   string `json:"snippet" jsonschema:"the receipt's (redacted) text around the phrase"`
}

// HistoryView is one page of hits, newest first.
type HistoryView struct {
	Hits          []HistoryHit `json:"hits"`
	NextPageToken string       `json:"next_page_token,omitempty" jsonschema:"pass as page_token for the next page"`
	Incomplete    bool         `json:"incomplete,omitempty" jsonschema:"the index is still catching up: newer receipts may be missing"`
}

func (b *Bridge) addHistoryTool() {
	addTool(b.server, &mcp.Tool{
		Name:        "terminal_history",
		Title:       "Search past commands",
		Description: "Search the signed receipts of commands you ran (what ran, the policy's reasons, and the redacted output) for a literal phrase: \"when did we last run the migrations, and what did it print?\". Newest first, a page at a time, each hit with its receipt_id (terminal_receipt reads it) and a snippet.",
		Annotations: &mcp.ToolAnnotations{Title: "Search past commands", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.history)
}

func (b *Bridge) history(ctx context.Context, _ *mcp.CallToolRequest, in HistoryInput) (*mcp.CallToolResult, *HistoryView, error) {
	r := &termdv1.SearchReceiptsRequest{Query: in.Query, SessionId: in.SessionID, Status: in.Status, Principal: in.Principal, Limit: in.Limit, PageToken: in.PageToken}
	var err error
	if r.Since, err = when("since", in.Since); err != nil {
		return nil, nil, err
	}
	if r.Until, err = when("until", in.Until); err != nil {
		return nil, nil, err
	}
	resp, err := b.c.Receipts.SearchReceipts(ctx, r)
	if err != nil {
		return nil, nil, failure(err, "")
	}
	v := &HistoryView{Hits: []HistoryHit{}, NextPageToken: resp.GetNextPageToken(), Incomplete: resp.GetIncomplete()}
	var lines []string
	for _, h := range resp.GetHits() {
		s := h.GetReceipt()
		hit := HistoryHit{
			ReceiptID: s.GetId(), SessionID: s.GetSessionId(), Status: s.GetStatus(), Command: s.GetCommand(),
			StartedAt: s.GetStartedAt().AsTime().Format(time.RFC3339), ExitCode: receiptExit(s.GetExitCode()),
			Field: h.GetField(), Snippet: h.GetSnippet(),
		}
		v.Hits = append(v.Hits, hit)
		lines = append(lines, fmt.Sprintf("- %s %s (%s) %s: %s", hit.StartedAt, hit.Command, hit.Status, hit.Field, hit.Snippet))
	}
	summary := fmt.Sprintf("no receipts you may see contain %q", in.Query)
	if len(v.Hits) > 0 {
		summary = fmt.Sprintf("%d receipts contain %q, newest first:\n%s", len(v.Hits), in.Query, strings.Join(lines, "\n"))
	}
	if v.NextPageToken != "" {
		summary += "\nmore: call terminal_history again with page_token " + v.NextPageToken
	}
	return reply(v, false, summary)
}

// when reads a time filter (client.ParseWhen: a duration ago or a time).
func when(name, s string) (*timestamppb.Timestamp, error) {
	ts, err := client.ParseWhen(s)
	if err != nil {
		return nil, fmt.Errorf("%s %q is %v. Next: fix it and call terminal_history again", name, s, err)
	}
	return ts, nil
}
