package mcpbridge_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/termd/termd/internal/harness"
)

// Background work through MCP, against a real daemon, on both subscription
// mechanisms (2026-07-28 subscriptions/listen, 2025-11-25
// resources/subscribe): terminal_execute with background returns at once,
// terminal_list shows the execution, terminal_output reads new output from
// an offset, and a subscriber to execution://ID is notified when it ends
// (cancelled, or on its own).
func TestBackgroundExecution(t *testing.T) {
	d := startDaemon(t)
	log := filepath.Join(d.Workspace, "log.txt")
	for _, tr := range transports[:2] {
		t.Run(tr.name, func(t *testing.T) {
			if err := os.WriteFile(log, []byte("hello\n"), 0o666); err != nil {
				t.Fatal(err)
			}
			cs, updated := connectForUpdates(t, d, tr)
			subscribe := func(uri string) {
				if tr.version == "2026-07-28" {
					// subscriptions/listen stays open until unsubscribed.
					go func() { _ = cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}) }()
					return
				}
				if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
					t.Fatalf("subscribe %s: %v", uri, err)
				}
			}
			waitUpdate := func(uri string) {
				t.Helper()
				select {
				case got := <-updated:
					if got != uri {
						t.Fatalf("notified of %s, want %s", got, uri)
					}
				case <-time.After(60 * time.Second):
					t.Fatalf("no notifications/resources/updated for %s", uri)
				}
			}

			plan, res := call(t, cs, "terminal_plan", map[string]any{"argv": []string{"tail", "-f", "log.txt"}}, false)
			if res.IsError {
				t.Fatalf("plan: %s", text(res))
			}
			begun := time.Now()
			ex, res := call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id"), "background": true}, false)
			if res.IsError || str(ex, "state") != "running" || str(ex, "execution_id") == "" {
				t.Fatalf("background execute should return running at once: %s", text(res))
			}
			if took := time.Since(begun); took > 20*time.Second {
				t.Errorf("background execute took %s", took)
			}
			id := str(ex, "execution_id")
			uri := str(ex, "resource_uri")
			if uri != "execution://"+id || !strings.Contains(str(ex, "next_step"), "terminal_output") {
				t.Fatalf("the result should name the resource and how to come back: %s", text(res))
			}

			list, res := call(t, cs, "terminal_list", map[string]any{}, false)
			execs, _ := list["executions"].([]any)
			if res.IsError || len(execs) != 1 || str(execs[0].(map[string]any), "execution_id") != id {
				t.Fatalf("terminal_list should show the running tail: %s", text(res))
			}

			checkOutputSinceOffset(t, cs, tr, log, id)

			subscribe(uri)
			st, res := call(t, cs, "terminal_status", map[string]any{"execution_id": id}, false)
			if res.IsError || str(st, "state") != "running" {
				t.Fatalf("still running before the cancel: %s", text(res))
			}
			if _, res := call(t, cs, "terminal_cancel", map[string]any{"execution_id": id}, false); res.IsError {
				t.Fatalf("cancel: %s", text(res))
			}
			waitUpdate(uri)
			rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
			if err != nil || !strings.Contains(rr.Contents[0].Text, `"state": "cancelled"`) || !strings.Contains(rr.Contents[0].Text, `"receipt_id"`) {
				t.Fatalf("after the notification the resource should show the end and its receipt: %v %v", rr, err)
			}
			list, _ = call(t, cs, "terminal_list", map[string]any{}, false)
			if execs, _ := list["executions"].([]any); len(execs) != 0 {
				t.Errorf("nothing should be running after the cancel: %v", list)
			}
			list, _ = call(t, cs, "terminal_list", map[string]any{"all": true}, false)
			if execs, _ := list["executions"].([]any); len(execs) != 1 || str(execs[0].(map[string]any), "state") != "cancelled" {
				t.Errorf("all: true should list the cancelled execution: %v", list)
			}

			// A command that ends on its own (maybe before the subscription
			// arrives: the bridge looks again once it is recorded).
			plan, _ = call(t, cs, "terminal_plan", map[string]any{"argv": []string{"sleep", "1"}}, false)
			ex, res = call(t, cs, "terminal_execute", map[string]any{"plan_id": str(plan, "plan_id"), "background": true}, false)
			if res.IsError {
				t.Fatalf("background sleep: %s", text(res))
			}
			subscribe(str(ex, "resource_uri"))
			waitUpdate(str(ex, "resource_uri"))
			st, _ = call(t, cs, "terminal_status", map[string]any{"execution_id": str(ex, "execution_id")}, false)
			if str(st, "state") != "succeeded" || str(st, "receipt_id") == "" {
				t.Errorf("after the notification terminal_status should show the end: %v", st)
			}

			// Only execution resources can be subscribed to.
			if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "policy://current"}); tr.version != "2026-07-28" && (err == nil || !strings.Contains(err.Error(), "execution://")) {
				t.Errorf("subscribing to policy://current: %v", err)
			}
		})
	}
}

// connectForUpdates connects a client over tr that hands the URIs of
// notifications/resources/updated to the returned channel, and checks the
// bridge offers resource subscriptions.
func connectForUpdates(t *testing.T, d *harness.Daemon, tr transport) (*mcp.ClientSession, chan string) {
	updated := make(chan string, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "termd-e2e", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: bridgeCmd(t, d, &syncBuf{})}, &mcp.ClientSessionOptions{ProtocolVersion: tr.version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if !cs.InitializeResult().Capabilities.Resources.Subscribe {
		t.Fatal("the bridge does not offer resource subscriptions")
	}
	return cs, updated
}

// checkOutputSinceOffset appends a line to the log the background tail
// follows: terminal_output from offset 6 shows exactly that new line.
func checkOutputSinceOffset(t *testing.T, cs *mcp.ClientSession, tr transport, log, id string) {
	// New output since an offset: what tail prints after "hello\n".
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	line := "world " + tr.version + "\n"
	_, _ = f.WriteString(line)
	f.Close()
	var got string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(got, "world"); {
		out, res := call(t, cs, "terminal_output", map[string]any{"execution_id": id, "offset": len("hello\n")}, false)
		if res.IsError {
			t.Fatalf("terminal_output: %s", text(res))
		}
		got = str(out, "data")
		if time.Now().After(deadline) {
			t.Fatalf("terminal_output from offset 6 never showed the new line: %q", got)
		}
	}
	if got != line {
		t.Errorf("terminal_output from offset 6: %q, want %q", got, line)
	}
}
