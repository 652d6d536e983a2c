package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// PortForwardInput opens (or closes) a forward into a workspace loopback.
type PortForwardInput struct {
	ExecutionID string `json:"execution_id,omitempty" jsonschema:"the execution running the server (its workspace loopback); or session_id"`
	SessionID   string `json:"session_id,omitempty" jsonschema:"a session: the loopback of its latest execution"`
	RemotePort  int    `json:"remote_port,omitempty" jsonschema:"the port the server listens on at 127.0.0.1 inside the workspace"`
	LocalPort   int    `json:"local_port,omitempty" jsonschema:"the port on the host's 127.0.0.1 (default: a free one)"`
	TTLSeconds  int    `json:"ttl_seconds,omitempty" jsonschema:"keep it open this long (default 600, max 3600)"`
	Close       string `json:"close,omitempty" jsonschema:"close this forward id instead"`
}

// PortForwardView is a forward as the tool returns it.
type PortForwardView struct {
	ForwardID    string `json:"forward_id"`
	URL          string `json:"url,omitempty" jsonschema:"http://127.0.0.1:PORT on the host, for a person's browser"`
	LocalAddress string `json:"local_address"`
	RemotePort   uint32 `json:"remote_port"`
	ExpiresAt    string `json:"expires_at,omitempty"`
	Closed       string `json:"closed,omitempty"`
	NextStep     string `json:"next_step,omitempty"`
}

const (
	defaultForwardTTL = 10 * time.Minute
	maxForwardTTL     = time.Hour
)

func (b *Bridge) addPortForwardTool() {
	addTool(b.server, &mcp.Tool{
		Name:        "terminal_port_forward",
		Title:       "Forward a port to the host",
		Description: "Make a dev server on your workspace loopback reachable at 127.0.0.1:PORT on the host, for ttl_seconds or until this client goes away; close: ID ends it.",
		Annotations: &mcp.ToolAnnotations{Title: "Forward a port to the host", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, b.portForward)
}

func (b *Bridge) portForward(ctx context.Context, _ *mcp.CallToolRequest, in PortForwardInput) (*mcp.CallToolResult, *PortForwardView, error) {
	if in.Close != "" {
		r, err := b.c.Forwards.ClosePortForward(ctx, &termdv1.ClosePortForwardRequest{ForwardId: in.Close})
		if err != nil {
			return nil, nil, failure(err, "")
		}
		v := forwardView(r.GetForward())
		return reply(v, false, "closed forward "+in.Close)
	}
	if in.RemotePort < 1 || in.RemotePort > 65535 || in.LocalPort < 0 || in.LocalPort > 65535 {
		return nil, nil, errors.New("remote_port must be 1-65535 (the server's port inside the workspace) and local_port 0-65535. Next: give remote_port")
	}
	ttl := defaultForwardTTL
	if in.TTLSeconds < 0 || time.Duration(in.TTLSeconds)*time.Second > maxForwardTTL {
		return nil, nil, errors.New("ttl_seconds must be 0 to 3600. Next: omit it for 10 minutes")
	} else if in.TTLSeconds > 0 {
		ttl = time.Duration(in.TTLSeconds) * time.Second
	}
	// The forward lives as long as this call to termd: held here, past the
	// tool call, for ttl (or until the bridge exits).
	fctx, cancel := context.WithTimeout(context.Background(), ttl)
	st, err := b.c.Forwards.PortForward(fctx, &termdv1.PortForwardRequest{ExecutionId: in.ExecutionID, SessionId: in.SessionID, RemotePort: uint32(in.RemotePort), LocalPort: uint32(in.LocalPort)})
	var first *termdv1.PortForwardResponse
	if err == nil {
		first, err = st.Recv()
	}
	if err != nil {
		cancel()
		return nil, nil, failure(err, "start the server with terminal_execute background: true (network workspace-loopback), then forward its execution_id")
	}
	go func() {
		defer cancel()
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()
	v := forwardView(first.GetForward())
	v.ExpiresAt = time.Now().Add(ttl).UTC().Format(time.RFC3339)
	v.NextStep = fmt.Sprintf("open %s; it closes at %s, or with terminal_port_forward close: %q", v.URL, v.ExpiresAt, v.ForwardID)
	return reply(v, false, fmt.Sprintf("forwarding %s -> 127.0.0.1:%d in the workspace loopback. Next: %s", v.URL, v.RemotePort, v.NextStep))
}

func forwardView(f *termdv1.PortForward) *PortForwardView {
	return &PortForwardView{ForwardID: f.GetId(), URL: "http://" + f.GetLocalAddress() + "/", LocalAddress: f.GetLocalAddress(), RemotePort: f.GetRemotePort(), Closed: f.GetClosed()}
}
