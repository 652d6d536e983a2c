// Command clifloor is the floor `make bench` holds termctl's start-up
// against: the least a Go client of termd must link and do for `termctl
// version` — a cobra root, a gRPC connection over the unix socket and one
// GetVersion call, through the generated API package — and nothing else.
package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/termd/termd/bench/internal/floorcmd"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func main() {
	floorcmd.Main("clifloor", func(ctx context.Context, conn *grpc.ClientConn) error {
		v, err := termdv1.NewDaemonServiceClient(conn).GetVersion(ctx, &termdv1.GetVersionRequest{})
		if err != nil {
			return err
		}
		fmt.Println("termd", v.Version)
		return nil
	})
}
