// Command clifloor is the floor `make bench` holds termctl's start-up
// against: the least a Go client of termd must link and do for `termctl
// version` — a cobra root, a gRPC connection over the unix socket and one
// GetVersion call, through the generated API package — and nothing else.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func main() {
	root := &cobra.Command{
		Use:  "clifloor",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := grpc.NewClient("unix://"+os.Getenv("TERMD_SOCKET"), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return err
			}
			defer conn.Close()
			v, err := termdv1.NewDaemonServiceClient(conn).GetVersion(context.Background(), &termdv1.GetVersionRequest{})
			if err != nil {
				return err
			}
			fmt.Println("termd", v.Version)
			return nil
		},
	}
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
