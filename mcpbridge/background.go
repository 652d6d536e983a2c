package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Background work: an execution started with terminal_execute's background
// flag (or one that outlived wait_seconds) runs in the daemon; the agent
// lists it with terminal_list, reads new output with terminal_output from an
// offset, and learns of its end by subscribing to its resource
// execution://ID: the bridge follows the daemon's event stream of the
// execution's session and sends notifications/resources/updated for that URI
// when the execution has finished (its receipt is then signed).

const executionPrefix = "execution://"

func executionURI(id string) string { return executionPrefix + id }

// ListInput asks for a session's executions.
type ListInput struct {
	All       bool   `json:"all,omitempty" jsonschema:"also list executions that have ended (since termd started); default: only running and paused ones"`
	SessionID string `json:"session_id,omitempty" jsonschema:"a termd session (default: this client's session)"`
}

// ListView lists executions.
type ListView struct {
	SessionID  string           `json:"session_id,omitempty"`
	Executions []ListedExecView `json:"executions"`
	NextStep   string           `json:"next_step"`
}

// ListedExecView is one execution in a list.
type ListedExecView struct {
	ExecutionID string   `json:"execution_id"`
	PlanID      string   `json:"plan_id"`
	State       string   `json:"state"`
	Argv        []string `json:"argv"`
	Cwd         string   `json:"cwd,omitempty"`
	StartedAt   string   `json:"started_at,omitempty" jsonschema:"RFC 3339"`
	StdoutBytes int64    `json:"stdout_bytes" jsonschema:"bytes written so far: terminal_output from your last next_offset reads what is new"`
	StderrBytes int64    `json:"stderr_bytes"`
	ExitCode    *int32   `json:"exit_code" jsonschema:"null while it runs, or when a signal ended it"`
	ReceiptID   string   `json:"receipt_id,omitempty"`
	ResourceURI string   `json:"resource_uri" jsonschema:"subscribe to it (resources/subscribe) to be notified when the execution ends"`
}

func (b *Bridge) list(ctx context.Context, req *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, *ListView, error) {
	sid := in.SessionID
	if sid == "" {
		key, _ := b.clientKey(req)
		id, ok := b.sessions.lookup(key)
		if !ok {
			v := &ListView{Executions: []ListedExecView{}, NextStep: "this client has run nothing yet: terminal_plan then terminal_execute (with background: true to come back later)"}
			return reply(v, false, "no executions: "+v.NextStep)
		}
		sid = id
	}
	r := &termdv1.ListExecutionsRequest{SessionId: sid}
	if !in.All {
		r.States = []termdv1.ExecutionState{termdv1.ExecutionState_EXECUTION_STATE_RUNNING, termdv1.ExecutionState_EXECUTION_STATE_PAUSED}
	}
	resp, err := b.c.Executions.ListExecutions(ctx, r)
	if err != nil {
		return nil, nil, failure(err, "")
	}
	v := &ListView{SessionID: sid, Executions: []ListedExecView{}}
	var lines []string
	for _, le := range resp.GetExecutions() {
		e := le.GetExecution()
		ev := executionView(e)
		lv := ListedExecView{
			ExecutionID: e.GetId(),
			PlanID:      e.GetPlanId(),
			State:       ev.State,
			Argv:        le.GetArgv(),
			Cwd:         le.GetCwd(),
			StdoutBytes: e.GetStdoutBytes(),
			StderrBytes: e.GetStderrBytes(),
			ExitCode:    ev.ExitCode,
			ReceiptID:   e.GetReceiptId(),
			ResourceURI: executionURI(e.GetId()),
		}
		if e.GetStartedAt() != nil {
			lv.StartedAt = e.GetStartedAt().AsTime().UTC().Format(time.RFC3339)
		}
		v.Executions = append(v.Executions, lv)
		lines = append(lines, fmt.Sprintf("%s %s: %s (%d bytes of stdout)", lv.ExecutionID, lv.State, strings.Join(lv.Argv, " "), lv.StdoutBytes))
	}
	what := "running"
	if in.All {
		what = "known"
	}
	if len(lines) == 0 {
		v.NextStep = "nothing is " + what + " in this session"
		return reply(v, false, fmt.Sprintf("no %s executions in session %s", what, sid))
	}
	v.NextStep = "terminal_output reads an execution's output from an offset, terminal_status its state, terminal_cancel stops it; subscribe to an execution's resource_uri to be notified when it ends"
	return reply(v, false, fmt.Sprintf("%d %s execution(s):\n%s\nNext: %s", len(lines), what, strings.Join(lines, "\n"), v.NextStep))
}

// startBackground starts a plan and returns at once with its execution.
func (b *Bridge) startBackground(ctx context.Context, planID string) (*mcp.CallToolResult, *ExecutionView, error) {
	r, err := b.c.Executions.Execute(ctx, &termdv1.ExecuteRequest{PlanId: planID})
	if err != nil {
		return nil, nil, err
	}
	v := executionView(r.GetExecution())
	v.ResourceURI = executionURI(v.ExecutionID)
	if !v.Done {
		v.NextStep = fmt.Sprintf("it runs in the background: terminal_output with execution_id %q and offset 0 reads its output as it comes (then from next_offset), terminal_status gives its state, terminal_list what is running; subscribe to %s to be notified when it ends", v.ExecutionID, v.ResourceURI)
	}
	return reply(v, false, fmt.Sprintf("execution %s: %s. Next: %s", v.ExecutionID, v.State, v.NextStep))
}

func (b *Bridge) readExecution(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, err := executionIDOf(uri)
	if err != nil {
		return nil, err
	}
	ex, err := b.c.Execution(ctx, id)
	if err != nil {
		return nil, resourceErr(uri, err)
	}
	v := executionView(ex)
	v.ResourceURI = uri
	data, _ := json.MarshalIndent(v, "", "  ")
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(data)}}}, nil
}

func executionIDOf(uri string) (string, error) {
	id, ok := strings.CutPrefix(uri, executionPrefix)
	if !ok || id == "" || strings.ContainsAny(id, "/?#") {
		return "", invalidParams(fmt.Sprintf("%s is not an execution resource: only execution://EXECUTION_ID resources can be subscribed to (the id comes from terminal_execute or terminal_list)", uri))
	}
	return id, nil
}

// endWatch follows the executions clients subscribed to, one daemon event
// stream per daemon session, and announces each one's end.
type endWatch struct {
	mu       sync.Mutex
	sessions map[string]*sessionWatch
}

type sessionWatch struct {
	execs  map[string]bool
	cancel context.CancelFunc
}

// subscribe is the resources/subscribe handler: execution://ID only.
func (b *Bridge) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	id, err := executionIDOf(req.Params.URI)
	if err != nil {
		return err
	}
	ex, err := b.c.Execution(ctx, id)
	if err != nil {
		return resourceErr(req.Params.URI, err)
	}
	return b.watchEnd(ctx, ex)
}

// unsubscribe leaves the watch running: it ends with the execution, and
// another client may still be subscribed.
func (b *Bridge) unsubscribe(context.Context, *mcp.UnsubscribeRequest) error { return nil }

// watchEnd arranges for a resources/updated notification when e ends.
func (b *Bridge) watchEnd(ctx context.Context, e *termdv1.Execution) error {
	w := &b.ends
	id, sid := e.GetId(), e.GetSessionId()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sessions == nil {
		w.sessions = map[string]*sessionWatch{}
	}
	sw := w.sessions[sid]
	if sw == nil {
		sctx, cancel := context.WithCancel(context.Background())
		stream, err := b.c.Events.StreamEvents(sctx, &termdv1.StreamEventsRequest{SessionId: sid})
		if err == nil {
			// The daemon sends the headers once the stream's starting point
			// is fixed: from here on no FINISHED event is missed.
			_, err = stream.Header()
		}
		if err != nil {
			cancel()
			return failure(err, "poll terminal_status instead")
		}
		sw = &sessionWatch{execs: map[string]bool{}, cancel: cancel}
		w.sessions[sid] = sw
		go b.followSession(sctx, sid, sw, stream)
	}
	sw.execs[id] = true
	// It may have ended before the stream opened: look once more, after the
	// SDK has recorded the subscription (it does when this handler returns).
	go b.recheck(sid, id)
	return nil
}

// followSession announces the end of each watched execution of session sid.
func (b *Bridge) followSession(ctx context.Context, sid string, sw *sessionWatch, stream termdv1.EventService_StreamEventsClient) {
	for {
		m, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) {
				b.log.Warn("following executions for their end", "session", sid, "err", err)
			}
			b.recheckAll(sid, sw)
			b.ends.mu.Lock()
			if b.ends.sessions[sid] == sw {
				delete(b.ends.sessions, sid)
			}
			b.ends.mu.Unlock()
			return
		}
		ev := m.GetEvent()
		switch ev.GetKind() {
		case termdv1.EventKind_EVENT_KIND_FINISHED:
			b.announce(sid, ev.GetExecution().GetId())
		case termdv1.EventKind_EVENT_KIND_LAGGED, termdv1.EventKind_EVENT_KIND_SESSION_CLOSED:
			b.recheckAll(sid, sw)
		}
	}
}

func (b *Bridge) recheckAll(sid string, sw *sessionWatch) {
	b.ends.mu.Lock()
	ids := make([]string, 0, len(sw.execs))
	for id := range sw.execs {
		ids = append(ids, id)
	}
	b.ends.mu.Unlock()
	for _, id := range ids {
		b.recheck(sid, id)
	}
}

// recheck announces id's end if it has ended.
func (b *Bridge) recheck(sid, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ex, err := b.c.Execution(ctx, id)
	if err == nil && execDone(ex) {
		b.announce(sid, id)
	}
}

// announce sends the notification once, and ends the session's stream when
// nothing is left to watch.
func (b *Bridge) announce(sid, id string) {
	w := &b.ends
	w.mu.Lock()
	sw := w.sessions[sid]
	if sw == nil || !sw.execs[id] {
		w.mu.Unlock()
		return
	}
	delete(sw.execs, id)
	if len(sw.execs) == 0 {
		sw.cancel()
		delete(w.sessions, sid)
	}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: executionURI(id)})
}
