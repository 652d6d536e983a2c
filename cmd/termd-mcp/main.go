// Command termd-mcp is termd's MCP bridge: an MCP server over stdio (one
// process per MCP client) or streamable HTTP, talking to termd through its
// unix socket. It holds no privilege of its own.
package main

import (
	"os"

	"github.com/termd/termd/mcpbridge"
)

func main() { os.Exit(mcpbridge.Main(os.Args[1:], os.Stderr)) }
