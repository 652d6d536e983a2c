package mcpbridge_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestResourcesAndPrompts(t *testing.T) {
	d := startDaemon(t)
	const nfiles = 150
	for i := range nfiles {
		if err := os.WriteFile(filepath.Join(d.Workspace, fmt.Sprintf("f%03d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const oddName = "héllo wörld ✓.txt"
	if err := os.WriteFile(filepath.Join(d.Workspace, oddName), []byte("odd name\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, d, transports[0], &clientRecorder{}, false)
	ctx := context.Background()

	plan, _ := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"ls", "nonexistent-dir"}}, false)
	ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id")}, false)
	if str(ex, "state") != "failed" || str(ex, "receipt_id") == "" {
		t.Fatalf("ls of a missing dir: %s", text(res))
	}
	receiptID := str(ex, "receipt_id")

	seen := listResources(t, ctx, cs, receiptID, nfiles)

	read := func(uri string) (string, error) {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return r.Contents[0].Text, nil
	}
	// A name with blanks and non-ASCII letters is listed as a valid URI that
	// reads back.
	var oddURI string
	for u := range seen {
		if strings.Contains(u, "%20") && strings.HasSuffix(u, ".txt") {
			oddURI = u
		}
	}
	if s, err := read(oddURI); oddURI == "" || strings.ContainsAny(oddURI, " éö✓") || err != nil || s != "odd name\n" {
		t.Errorf("workspace file %q listed as %q: %v %q", oddName, oddURI, err, s)
	}
	if s, err := read("policy://current"); err != nil || !strings.Contains(s, `"version"`) {
		t.Errorf("policy://current: %v %q", err, s)
	}
	if s, err := read("receipt://" + receiptID); err != nil || !strings.Contains(s, receiptID) || !strings.Contains(s, "signature") {
		t.Errorf("receipt resource: %v %.200q", err, s)
	}
	var fileURI string
	for u := range seen {
		if strings.HasSuffix(u, "/f007.txt") {
			fileURI = u
		}
	}
	if s, err := read(fileURI); err != nil || s != "file 7\n" {
		t.Errorf("%s: %v %q", fileURI, err, s)
	}
	// Confinement is the daemon's: outside the workspace nothing is read.
	for _, uri := range []string{"workspace:///etc/passwd", "workspace:///" + strings.TrimPrefix(d.Workspace, "/") + "/../termd.yaml"} {
		if s, err := read(uri); err == nil {
			t.Errorf("%s was read: %.100q", uri, s)
		}
	}

	// Errors have JSON-RPC codes and name the problem: a missing file is
	// "resource not found" (mcp.CodeResourceNotFound), a path outside every root is invalid
	// params naming the roots, never read relative to the workspace.
	var rpcErr *jsonrpc.Error
	if _, err := read("workspace://" + filepath.Join(d.Workspace, "no-such.txt")); !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeResourceNotFound || !strings.Contains(rpcErr.Message, "not found") {
		t.Errorf("a missing workspace file should be resource-not-found, got %v", err)
	}
	if err := os.MkdirAll(filepath.Join(d.Workspace, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Workspace, "etc", "passwd"), []byte("in the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := read("workspace:///etc/passwd"); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, d.Workspace) {
		t.Errorf("workspace:///etc/passwd should be refused naming the roots (not read as <workspace>/etc/passwd): %v %q", err, s)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "diagnose_failure", Arguments: map[string]string{"receipt_id": "no-such-receipt"}}); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || strings.Contains(rpcErr.Message, "plan") {
		t.Errorf("prompts/get of a missing receipt should be invalid params (not code 0) about the receipt: %v", err)
	}

	// Prompts.
	p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "safe_terminal_task", Arguments: map[string]string{"task": "count the files"}})
	if err != nil || len(p.Messages) == 0 || !strings.Contains(p.Messages[0].Content.(*mcp.TextContent).Text, "count the files") {
		t.Errorf("safe_terminal_task: %v %+v", err, p)
	}
	p, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "diagnose_failure", Arguments: map[string]string{"receipt_id": receiptID}})
	if err != nil || len(p.Messages) != 2 {
		t.Fatalf("diagnose_failure: %v %+v", err, p)
	}
	if er, ok := p.Messages[0].Content.(*mcp.EmbeddedResource); !ok || !strings.Contains(er.Resource.Text, "nonexistent-dir") {
		t.Errorf("diagnose_failure does not carry the receipt: %+v", p.Messages[0].Content)
	}
}

// listResources lists every resource across cursor pages and checks the
// listing holds the policy, the latest receipt and every workspace file
// (nfiles of them and one with an odd name), and refuses a forged cursor.
func listResources(t *testing.T, ctx context.Context, cs *mcp.ClientSession, receiptID string, nfiles int) map[string]bool {
	// Listing: the policy, the latest receipts, and every workspace file
	// across cursor pages.
	seen := map[string]bool{}
	pages := 0
	var cursor string
	for {
		r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, x := range r.Resources {
			seen[x.URI] = true
		}
		if cursor = r.NextCursor; cursor == "" || pages > 50 {
			break
		}
	}
	t.Logf("%d resources in %d pages", len(seen), pages)
	if !seen["policy://current"] || !seen["receipt://"+receiptID] {
		t.Errorf("policy or latest receipt not listed")
	}
	files := 0
	for u := range seen {
		if strings.HasPrefix(u, "workspace:///") && strings.HasSuffix(u, ".txt") {
			files++
		}
	}
	if files != nfiles+1 {
		t.Errorf("listed %d workspace files, want %d", files, nfiles+1)
	}
	if _, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "not-a-cursor"}); err == nil {
		t.Error("a forged cursor was accepted")
	}
	return seen
}

func TestPauseResumeCancel(t *testing.T) {
	d := startDaemon(t)
	cs := connect(t, d, transports[2], &clientRecorder{}, false)
	plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"sleep", "30"}}, false)
	if res.IsError {
		t.Fatal(text(res))
	}
	ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id"), "wait_seconds": 1}, false)
	id := str(ex, "execution_id")
	if str(ex, "state") != "running" {
		t.Fatalf("execute: %s", text(res))
	}
	// One client, one session: its next plan reuses it.
	again, _ := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"true"}}, false)
	if str(again, "session_id") != str(plan, "session_id") {
		t.Errorf("second plan in session %s, first in %s", str(again, "session_id"), str(plan, "session_id"))
	}
	for _, step := range []struct{ tool, want string }{{"terminal_pause", "paused"}, {"terminal_resume", "running"}, {"terminal_cancel", ""}} {
		out, res := call(t, cs, step.tool, map[string]any{"execution_id": id}, false)
		if res.IsError || (step.want != "" && str(out, "state") != step.want) {
			t.Errorf("%s: %s", step.tool, text(res))
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, res := call(t, cs, "terminal_status", map[string]any{"execution_id": id}, false)
		if st["done"] == true {
			if str(st, "state") != "cancelled" || st["receipt"] == nil {
				t.Errorf("after cancel: %s", text(res))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cancel did not end it: %s", text(res))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Without a configured adviser, advice is a clear error, not a hang.
	_, res = call(t, cs, "terminal_advise", map[string]any{"question": "what does ls -la show?"}, false)
	if !res.IsError || !strings.Contains(strings.ToLower(text(res)), "advis") {
		t.Errorf("advise without an adviser: %s", text(res))
	}
	_, res = call(t, cs, "terminal_advise", map[string]any{"question": "a", "task": "b"}, false)
	if !res.IsError {
		t.Errorf("advise with two intents: %s", text(res))
	}

	// The same plan cannot run twice; retry makes a fresh plan.
	r, res := call(t, cs, "terminal_retry", map[string]any{"plan_id": str(plan, "plan_id")}, false)
	if res.IsError || str(r, "plan_id") == "" || str(r, "plan_id") == str(plan, "plan_id") || str(r, "state") != "planned" {
		t.Errorf("retry: %s", text(res))
	}
}
