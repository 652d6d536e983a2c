// Package floorcmd is what the start-up floors (bench/clifloor and
// bench/mcpfloor) have in common: the least a Go client of termd does
// before its own work, a cobra root and a gRPC client (made, not dialled)
// of the unix socket in $TERMD_SOCKET.
package floorcmd

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Main runs a cobra root named use that takes no arguments and calls run
// with a client connection to termd; it exits 1 when run fails.
func Main(use string, run func(ctx context.Context, conn *grpc.ClientConn) error) {
	root := &cobra.Command{
		Use:  use,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := grpc.NewClient("unix://"+os.Getenv("TERMD_SOCKET"), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return err
			}
			defer conn.Close()
			return run(context.Background(), conn)
		},
	}
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
