package server

import (
	"context"
	"runtime"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/internal/buildinfo"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// StatusSource fills the domain part of a status answer.
type StatusSource interface {
	FillStatus(ctx context.Context, caller *termdv1.Principal, st *termdv1.GetStatusResponse)
}

type daemonSvc struct {
	termdv1.UnimplementedDaemonServiceServer
	s   *Server
	src StatusSource
}

// RegisterDaemon registers the DaemonService; src may be nil.
func (s *Server) RegisterDaemon(src StatusSource) {
	termdv1.RegisterDaemonServiceServer(s.grpc, &daemonSvc{s: s, src: src})
}

func (d *daemonSvc) GetStatus(ctx context.Context, _ *termdv1.GetStatusRequest) (*termdv1.GetStatusResponse, error) {
	cfg := d.s.cfg()
	st := &termdv1.GetStatusResponse{
		Version:       buildinfo.String(),
		StartedAt:     timestamppb.New(d.s.started),
		UptimeSeconds: int64(time.Since(d.s.started).Seconds()),
		Caller:        PrincipalFrom(ctx),
		Workspaces:    cfg.Workspaces,
		ConsoleUrl:    cfg.ConsoleURL,
	}
	if d.src != nil {
		d.src.FillStatus(ctx, st.Caller, st)
	}
	return st, nil
}

func (d *daemonSvc) GetVersion(context.Context, *termdv1.GetVersionRequest) (*termdv1.GetVersionResponse, error) {
	return &termdv1.GetVersionResponse{Version: buildinfo.String(), ApiVersion: buildinfo.APIVersion, GoVersion: runtime.Version()}, nil
}
