// Command termd-gateway serves termd's REST API, event streams (SSE) and the
// web console over HTTP, relaying every call to the daemon's unix socket.
package main

import (
	"os"

	"github.com/termd/termd/gateway"
)

func main() { os.Exit(gateway.Main(os.Args[1:], os.Stderr)) }
