// Command termd is the termd daemon.
package main

import (
	"context"
	"os"

	"github.com/termd/termd/client"
	"github.com/termd/termd/daemon"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func main() { os.Exit(daemon.Main(daemon.Deps{DaemonStatus: daemonStatus})) }

// daemonStatus is `termd doctor`'s question to a running termd, asked
// through client/ (which no package under daemon/ links): its errors carry
// the gRPC code and say what to do.
func daemonStatus(ctx context.Context, socket string) (*termdv1.GetStatusResponse, error) {
	c, err := client.Dial(socket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Status(ctx)
}
