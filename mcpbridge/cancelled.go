package mcpbridge

import (
	"context"
	"encoding/json"
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
