// Command mcpfloor is the floor `make bench` holds termd-mcp's cold start
// against: the packages the bridge cannot start without (the MCP SDK, gRPC
// and the generated API, cobra) initialised, a gRPC client made (not
// dialled) and an MCP server with one tool of a hand-written schema
// answering over stdio — and nothing else.
//
// With MCPFLOOR_TOOLS=FILE (a JSON array of tools, as a tools/list answer
// lists them) its tools/list answer carries those tools instead, as JSON
// text read from the file: the floor for serving that answer, which the
// client pays for decoding as much as the server for sending.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

	"github.com/termd/termd/bench/internal/floorcmd"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func main() {
	floorcmd.Main("mcpfloor", func(ctx context.Context, conn *grpc.ClientConn) error {
		_ = termdv1.NewDaemonServiceClient(conn)
		s := mcp.NewServer(&mcp.Implementation{Name: "mcpfloor", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
		if f := os.Getenv("MCPFLOOR_TOOLS"); f != "" {
			tools, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					res, err := next(ctx, method, req)
					if lr, ok := res.(*mcp.ListToolsResult); ok {
						return listed{lr, tools}, err
					}
					return res, err
				}
			})
		}
		return s.Run(ctx, &mcp.StdioTransport{})
	})
}

// listed is a tools/list answer whose tools are JSON text.
type listed struct {
	*mcp.ListToolsResult
	tools []byte
}

func (l listed) MarshalJSON() ([]byte, error) {
	r := *l.ListToolsResult
	r.Tools = nil
	data, err := json.Marshal(&r)
	if err != nil {
		return nil, err
	}
	head, ok := bytes.CutSuffix(data, []byte(`"tools":null}`))
	if !ok {
		return json.Marshal(l.ListToolsResult) // the SDK's answer changed shape: list the own tool
	}
	return append(append(head, `"tools":`...), append(bytes.TrimSpace(l.tools), '}')...), nil
}
