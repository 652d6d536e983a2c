package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP: after a client cancels a request (notifications/cancelled) the
// server sends no response to it. The SDK cancels the handler's context
// but still writes whatever the handler returns; cancelAware drops that
// response on the stdio connection. (A stateless HTTP request's response
// has nowhere to go once its client closed it.)
type cancelAware struct{ mcp.Transport }

func (t cancelAware) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &cancelConn{Connection: c, cancelled: map[jsonrpc.ID]bool{}}, nil
}

type cancelConn struct {
	mcp.Connection
	mu        sync.Mutex
	cancelled map[jsonrpc.ID]bool
}

func (c *cancelConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
				c.mu.Lock()
				if len(c.cancelled) >= 1024 { // cancels of requests already answered
					clear(c.cancelled)
				}
				c.cancelled[id] = true
				c.mu.Unlock()
			}
		}
	}
	return msg, err
}

func (c *cancelConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		drop := c.cancelled[resp.ID]
		delete(c.cancelled, resp.ID)
		c.mu.Unlock()
		if drop {
			return nil
		}
	}
	return c.Connection.Write(ctx, msg)
}

// Over stateful streamable HTTP the SDK builds the session's transport
// itself, so the same rule is kept at the HTTP edge: httpCancels notes each
// notifications/cancelled a session's client POSTs, and the SSE streams of
// that session (the call's POST stream, and a GET resuming it with
// Last-Event-ID from the event store) drop the response to a cancelled
// request. The notification is read before the SDK sees it, so before it
// cancels the handler, so before the handler's response is written.
type httpCancels struct {
	mu       sync.Mutex
	sessions map[string]map[jsonrpc.ID]bool
}

const maxHTTPCancels = 1024

// note records the cancellations in a POST body of session sid.
func (h *httpCancels) note(sid string, body []byte) {
	type msg struct {
		Method string `json:"method"`
		Params struct {
			RequestID any `json:"requestId"`
		} `json:"params"`
	}
	var msgs []msg
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		_ = json.Unmarshal(body, &msgs)
	} else {
		var m msg
		if json.Unmarshal(body, &m) == nil {
			msgs = append(msgs, m)
		}
	}
	for _, m := range msgs {
		if m.Method != "notifications/cancelled" {
			continue
		}
		id, err := jsonrpc.MakeID(m.Params.RequestID)
		if err != nil || !id.IsValid() {
			continue
		}
		h.mu.Lock()
		if h.sessions == nil || len(h.sessions) >= maxHTTPCancels {
			h.sessions = map[string]map[jsonrpc.ID]bool{}
		}
		ids := h.sessions[sid]
		if ids == nil || len(ids) >= maxHTTPCancels { // cancels of requests already answered
			ids = map[jsonrpc.ID]bool{}
			h.sessions[sid] = ids
		}
		ids[id] = true
		h.mu.Unlock()
	}
}

// forget drops a closed session's record.
func (h *httpCancels) forget(sid string) {
	h.mu.Lock()
	delete(h.sessions, sid)
	h.mu.Unlock()
}

func (h *httpCancels) cancelled(sid string, id jsonrpc.ID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[sid][id]
}

func (h *httpCancels) any(sid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions[sid]) > 0
}

// sseFilter passes a session's SSE stream through event by event, leaving
// out responses to requests its client cancelled.
type sseFilter struct {
	http.ResponseWriter
	h       *httpCancels
	sid     string
	pending []byte // the start of an event not yet complete
	sse     *bool  // whether the response is an event stream (set at the first write)
}

func (f *sseFilter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func (f *sseFilter) Write(p []byte) (int, error) {
	if f.sse == nil {
		sse := strings.HasPrefix(f.Header().Get("Content-Type"), "text/event-stream")
		f.sse = &sse
	}
	if !*f.sse {
		return f.ResponseWriter.Write(p)
	}
	f.pending = append(f.pending, p...)
	for {
		end := bytes.Index(f.pending, []byte("\n\n"))
		if end < 0 {
			return len(p), nil
		}
		ev := f.pending[:end+2]
		if !f.dropped(ev) {
			if _, err := f.ResponseWriter.Write(ev); err != nil {
				return 0, err
			}
		}
		f.pending = f.pending[end+2:]
	}
}

func (f *sseFilter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// dropped reports whether event ev is a response to a cancelled request.
func (f *sseFilter) dropped(ev []byte) bool {
	if !f.h.any(f.sid) {
		return false
	}
	for line := range bytes.SplitSeq(ev, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		var m struct {
			ID     any             `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(bytes.TrimSpace(data), &m) != nil || m.Method != "" || (m.Result == nil && m.Error == nil) {
			return false
		}
		id, err := jsonrpc.MakeID(m.ID)
		return err == nil && id.IsValid() && f.h.cancelled(f.sid, id)
	}
	return false
}
