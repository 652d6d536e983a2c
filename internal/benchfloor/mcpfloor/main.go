// Command mcpfloor is the floor `make bench` holds termd-mcp's cold start
// against: the packages the bridge cannot start without (the MCP SDK, gRPC
// and the generated API, cobra) initialised, a gRPC client made (not
// dialled) and an MCP server with one tool of a hand-written schema
// answering over stdio — and nothing else.
package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func main() {
	root := &cobra.Command{
		Use:  "mcpfloor",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := grpc.NewClient("unix://"+os.Getenv("TERMD_SOCKET"), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return err
			}
			defer conn.Close()
			_ = termdv1.NewDaemonServiceClient(conn)
			s := mcp.NewServer(&mcp.Implementation{Name: "mcpfloor", Version: "1"}, nil)
			s.AddTool(&mcp.Tool{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
			return s.Run(context.Background(), &mcp.StdioTransport{})
		},
	}
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
