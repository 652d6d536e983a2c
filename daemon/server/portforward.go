package server

import (
	"context"

	"google.golang.org/grpc"

	"github.com/termd/termd/daemon/broker"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

type portForwardSvc struct {
	termdv1.UnimplementedPortForwardServiceServer
	b *broker.Broker
}

func (s portForwardSvc) PortForward(r *termdv1.PortForwardRequest, st grpc.ServerStreamingServer[termdv1.PortForwardResponse]) error {
	return stream(r, st, s.b.PortForward)
}

func (s portForwardSvc) ListPortForwards(ctx context.Context, _ *termdv1.ListPortForwardsRequest) (*termdv1.ListPortForwardsResponse, error) {
	return &termdv1.ListPortForwardsResponse{Forwards: s.b.ListPortForwards(who(ctx))}, nil
}

func (s portForwardSvc) ClosePortForward(ctx context.Context, r *termdv1.ClosePortForwardRequest) (*termdv1.ClosePortForwardResponse, error) {
	f, err := s.b.ClosePortForward(who(ctx), r.ForwardId)
	return &termdv1.ClosePortForwardResponse{Forward: f}, err
}
