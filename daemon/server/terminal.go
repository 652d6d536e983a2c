package server

import (
	"context"

	"google.golang.org/grpc"

	"github.com/termd/termd/daemon/broker"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// terminalSvc is the TerminalService: a thin translation to the broker's
// terminal hubs (daemon/broker/terminals).
type terminalSvc struct {
	termdv1.UnimplementedTerminalServiceServer
	b *broker.Broker
}

func (s terminalSvc) AttachTerminal(r *termdv1.AttachTerminalRequest, st grpc.ServerStreamingServer[termdv1.AttachTerminalResponse]) error {
	return stream(r, st, s.b.AttachTerminal)
}

func (s terminalSvc) SendInput(ctx context.Context, r *termdv1.SendInputRequest) (*termdv1.SendInputResponse, error) {
	return s.b.SendInput(ctx, who(ctx), r)
}

func (s terminalSvc) GetScreen(ctx context.Context, r *termdv1.GetScreenRequest) (*termdv1.GetScreenResponse, error) {
	return s.b.GetScreen(ctx, who(ctx), r)
}

func (s terminalSvc) ResizeTerminal(ctx context.Context, r *termdv1.ResizeTerminalRequest) (*termdv1.ResizeTerminalResponse, error) {
	e, err := s.b.ResizeTerminal(ctx, who(ctx), r.ExecutionId, r.Size)
	return &termdv1.ResizeTerminalResponse{Execution: e}, err
}

func (s terminalSvc) TakeInput(ctx context.Context, r *termdv1.TakeInputRequest) (*termdv1.TakeInputResponse, error) {
	e, err := s.b.TakeInput(ctx, who(ctx), r.ExecutionId)
	return &termdv1.TakeInputResponse{Execution: e}, err
}

func (s terminalSvc) ReleaseInput(ctx context.Context, r *termdv1.ReleaseInputRequest) (*termdv1.ReleaseInputResponse, error) {
	e, err := s.b.ReleaseInput(ctx, who(ctx), r.ExecutionId)
	return &termdv1.ReleaseInputResponse{Execution: e}, err
}
