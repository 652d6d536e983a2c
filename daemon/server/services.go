package server

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"

	"github.com/termd/termd/daemon/broker"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// RegisterBroker registers every domain service, each a thin translation to the broker.
func (s *Server) RegisterBroker(b *broker.Broker) {
	g := s.grpc
	termdv1.RegisterSessionServiceServer(g, sessionSvc{b: b})
	termdv1.RegisterPlanServiceServer(g, planSvc{b: b})
	termdv1.RegisterExecutionServiceServer(g, execSvc{b: b})
	termdv1.RegisterEventServiceServer(g, eventSvc{b: b})
	termdv1.RegisterReceiptServiceServer(g, receiptSvc{b: b})
	termdv1.RegisterPolicyServiceServer(g, policySvc{b: b})
	termdv1.RegisterAdviserServiceServer(g, adviserSvc{b: b})
	termdv1.RegisterWorkspaceServiceServer(g, workspaceSvc{b: b})
	termdv1.RegisterGrantServiceServer(g, grantSvc{b: b})
	termdv1.RegisterTerminalServiceServer(g, terminalSvc{b: b})
	termdv1.RegisterPortForwardServiceServer(g, portForwardSvc{b: b})
}

var who = PrincipalFrom

// stream serves a server-streaming call the broker answers by sending each
// response itself, as the caller on the stream's context.
func stream[Req, Resp any](r *Req, st grpc.ServerStreamingServer[Resp], serve func(context.Context, *termdv1.Principal, *Req, func(*Resp) error) error) error {
	ctx := st.Context()
	return serve(ctx, who(ctx), r, st.Send)
}

type sessionSvc struct {
	termdv1.UnimplementedSessionServiceServer
	b *broker.Broker
}

func (s sessionSvc) CreateSession(ctx context.Context, r *termdv1.CreateSessionRequest) (*termdv1.CreateSessionResponse, error) {
	ss, err := s.b.CreateSession(ctx, who(ctx), r.Label)
	return &termdv1.CreateSessionResponse{Session: ss}, err
}

func (s sessionSvc) GetSession(ctx context.Context, r *termdv1.GetSessionRequest) (*termdv1.GetSessionResponse, error) {
	ss, err := s.b.GetSession(ctx, who(ctx), r.SessionId)
	return &termdv1.GetSessionResponse{Session: ss}, err
}

func (s sessionSvc) ListSessions(ctx context.Context, r *termdv1.ListSessionsRequest) (*termdv1.ListSessionsResponse, error) {
	return &termdv1.ListSessionsResponse{Sessions: s.b.ListSessions(ctx, who(ctx), r.IncludeClosed)}, nil
}

func (s sessionSvc) CloseSession(ctx context.Context, r *termdv1.CloseSessionRequest) (*termdv1.CloseSessionResponse, error) {
	ss, err := s.b.CloseSession(ctx, who(ctx), r.SessionId)
	return &termdv1.CloseSessionResponse{Session: ss}, err
}

type planSvc struct {
	termdv1.UnimplementedPlanServiceServer
	b *broker.Broker
}

func (s planSvc) CreatePlan(ctx context.Context, r *termdv1.CreatePlanRequest) (*termdv1.CreatePlanResponse, error) {
	p, err := s.b.CreatePlan(ctx, who(ctx), r.SessionId, r.Request)
	return &termdv1.CreatePlanResponse{Plan: p}, err
}

func (s planSvc) GetPlan(ctx context.Context, r *termdv1.GetPlanRequest) (*termdv1.GetPlanResponse, error) {
	p, err := s.b.GetPlan(ctx, who(ctx), r.PlanId)
	return &termdv1.GetPlanResponse{Plan: p}, err
}

func (s planSvc) ListPlans(ctx context.Context, r *termdv1.ListPlansRequest) (*termdv1.ListPlansResponse, error) {
	ps, err := s.b.ListPlans(ctx, who(ctx), r)
	return &termdv1.ListPlansResponse{Plans: ps}, err
}

func (s planSvc) ApprovePlan(ctx context.Context, r *termdv1.ApprovePlanRequest) (*termdv1.ApprovePlanResponse, error) {
	p, g, err := s.b.ApprovePlanGrant(ctx, who(ctx), r.PlanId, r.RequestHash, r.Grant)
	return &termdv1.ApprovePlanResponse{Plan: p, Grant: g}, err
}

func (s planSvc) DenyPlan(ctx context.Context, r *termdv1.DenyPlanRequest) (*termdv1.DenyPlanResponse, error) {
	p, err := s.b.DenyPlan(ctx, who(ctx), r.PlanId, r.Reason)
	return &termdv1.DenyPlanResponse{Plan: p}, err
}

func (s planSvc) Replan(ctx context.Context, r *termdv1.ReplanRequest) (*termdv1.ReplanResponse, error) {
	p, err := s.b.Replan(ctx, who(ctx), r.PlanId)
	return &termdv1.ReplanResponse{Plan: p}, err
}

type execSvc struct {
	termdv1.UnimplementedExecutionServiceServer
	b *broker.Broker
}

func (s execSvc) Execute(ctx context.Context, r *termdv1.ExecuteRequest) (*termdv1.ExecuteResponse, error) {
	e, err := s.b.Execute(ctx, who(ctx), r.PlanId, r.SessionId)
	return &termdv1.ExecuteResponse{Execution: e}, err
}

func (s execSvc) ExecuteAndWait(r *termdv1.ExecuteAndWaitRequest, st grpc.ServerStreamingServer[termdv1.ExecuteAndWaitResponse]) error {
	ctx := st.Context()
	var ms []*termdv1.ExecuteAndWaitResponse
	return s.b.ExecuteAndFollow(ctx, who(ctx), r.PlanId, r.SessionId, broker.FollowOptions{Detach: r.Detach, Live: r.Live}, func(evs []*termdv1.Event) error {
		// A batch's messages are made first and then sent back to back, so
		// gRPC's writer finds them queued together: one write for them all.
		ms = ms[:0]
		for _, e := range evs {
			m := &termdv1.ExecuteAndWaitResponse{Event: e}
			if r.ShareReceipt && e.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
				// The share form rides on the final message: no ExportReceipt
				// round trip after every execution (the MCP bridge's case).
				if js, err := s.b.ShareReceiptJSON(ctx, who(ctx), e.GetReceipt().GetId()); err == nil {
					m.ShareReceiptJson = string(js)
				}
			}
			ms = append(ms, m)
		}
		for _, m := range ms {
			if err := st.Send(m); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s execSvc) GetExecution(ctx context.Context, r *termdv1.GetExecutionRequest) (*termdv1.GetExecutionResponse, error) {
	e, err := s.b.GetExecution(ctx, who(ctx), r.ExecutionId)
	return &termdv1.GetExecutionResponse{Execution: e}, err
}

func (s execSvc) PauseExecution(ctx context.Context, r *termdv1.PauseExecutionRequest) (*termdv1.PauseExecutionResponse, error) {
	e, err := s.b.PauseExecution(ctx, who(ctx), r.ExecutionId)
	return &termdv1.PauseExecutionResponse{Execution: e}, err
}

func (s execSvc) ResumeExecution(ctx context.Context, r *termdv1.ResumeExecutionRequest) (*termdv1.ResumeExecutionResponse, error) {
	e, err := s.b.ResumeExecution(ctx, who(ctx), r.ExecutionId)
	return &termdv1.ResumeExecutionResponse{Execution: e}, err
}

func (s execSvc) CancelExecution(ctx context.Context, r *termdv1.CancelExecutionRequest) (*termdv1.CancelExecutionResponse, error) {
	e, err := s.b.CancelExecution(ctx, who(ctx), r.ExecutionId)
	return &termdv1.CancelExecutionResponse{Execution: e}, err
}

func (s execSvc) ReadOutput(ctx context.Context, r *termdv1.ReadOutputRequest) (*termdv1.ReadOutputResponse, error) {
	return s.b.ReadOutput(ctx, who(ctx), r)
}

func (s execSvc) ListExecutions(ctx context.Context, r *termdv1.ListExecutionsRequest) (*termdv1.ListExecutionsResponse, error) {
	es, err := s.b.ListExecutions(ctx, who(ctx), r)
	return &termdv1.ListExecutionsResponse{Executions: es}, err
}

type eventSvc struct {
	termdv1.UnimplementedEventServiceServer
	b *broker.Broker
}

func (s eventSvc) StreamEvents(r *termdv1.StreamEventsRequest, st grpc.ServerStreamingServer[termdv1.StreamEventsResponse]) error {
	ctx := st.Context()
	// The headers go out once the stream's starting point is fixed, so a
	// client that waits for them knows "now" has begun.
	ready := func() { _ = st.SendHeader(nil) }
	return s.b.StreamEvents(ctx, who(ctx), r.SessionId, r.SinceSeq, r.History, ready, func(e *termdv1.Event) error {
		return st.Send(&termdv1.StreamEventsResponse{Event: e})
	})
}

type receiptSvc struct {
	termdv1.UnimplementedReceiptServiceServer
	b *broker.Broker
}

func receiptJSON(r *receipt.Receipt) (string, error) {
	data, err := receipt.IndentedJSON(r)
	if err != nil {
		return "", errdefs.Internal("encoding receipt %s: %v", r.ID, err)
	}
	return string(data), nil
}

func (s receiptSvc) GetReceipt(ctx context.Context, r *termdv1.GetReceiptRequest) (*termdv1.GetReceiptResponse, error) {
	rc, err := s.b.GetReceipt(ctx, who(ctx), r.ReceiptId, r.SessionId)
	if err != nil {
		return nil, err
	}
	js, err := receiptJSON(rc)
	return &termdv1.GetReceiptResponse{Summary: broker.Summary(rc), ReceiptJson: js}, err
}

func (s receiptSvc) ListReceipts(ctx context.Context, r *termdv1.ListReceiptsRequest) (*termdv1.ListReceiptsResponse, error) {
	rs, err := s.b.ListReceipts(ctx, who(ctx), r)
	if err != nil {
		return nil, err
	}
	out := &termdv1.ListReceiptsResponse{}
	for _, rc := range rs {
		out.Receipts = append(out.Receipts, broker.Summary(rc))
	}
	return out, nil
}

func (s receiptSvc) ExportReceipt(ctx context.Context, r *termdv1.ExportReceiptRequest) (*termdv1.ExportReceiptResponse, error) {
	rc, err := s.b.ExportReceipt(ctx, who(ctx), r.ReceiptId, r.Share)
	if err != nil {
		return nil, err
	}
	js, err := receiptJSON(rc)
	return &termdv1.ExportReceiptResponse{ReceiptJson: js}, err
}

func (s receiptSvc) ExportReceipts(r *termdv1.ExportReceiptsRequest, st grpc.ServerStreamingServer[termdv1.ExportReceiptsResponse]) error {
	ctx := st.Context()
	return s.b.ExportReceipts(ctx, who(ctx), r, func(rc *receipt.Receipt) error {
		data, err := json.Marshal(rc)
		if err != nil {
			return errdefs.Internal("encoding receipt %s: %v", rc.ID, err)
		}
		return st.Send(&termdv1.ExportReceiptsResponse{ReceiptJson: string(data)})
	})
}

func (s receiptSvc) VerifyReceipt(ctx context.Context, r *termdv1.VerifyReceiptRequest) (*termdv1.VerifyReceiptResponse, error) {
	if r.ReceiptJson == "" {
		return nil, errdefs.Invalid("receipt_json is empty; send the receipt document to verify")
	}
	return s.b.VerifyReceipt(ctx, []byte(r.ReceiptJson)), nil
}

func (s receiptSvc) GetPublicKey(ctx context.Context, _ *termdv1.GetPublicKeyRequest) (*termdv1.GetPublicKeyResponse, error) {
	return s.b.PublicKeys(), nil
}

func (s receiptSvc) VerifyAuditChain(ctx context.Context, r *termdv1.VerifyAuditChainRequest) (*termdv1.VerifyAuditChainResponse, error) {
	return s.b.VerifyAuditChain(ctx, r), nil
}

func (s receiptSvc) PruneReceipts(ctx context.Context, r *termdv1.PruneReceiptsRequest) (*termdv1.PruneReceiptsResponse, error) {
	return s.b.PruneReceipts(ctx, who(ctx), r)
}

func (s receiptSvc) SearchReceipts(ctx context.Context, r *termdv1.SearchReceiptsRequest) (*termdv1.SearchReceiptsResponse, error) {
	return s.b.SearchReceipts(ctx, who(ctx), r)
}

func (s receiptSvc) ReindexReceipts(ctx context.Context, _ *termdv1.ReindexReceiptsRequest) (*termdv1.ReindexReceiptsResponse, error) {
	return s.b.ReindexReceipts(ctx, who(ctx))
}

type policySvc struct {
	termdv1.UnimplementedPolicyServiceServer
	b *broker.Broker
}

func (s policySvc) CheckPolicy(ctx context.Context, r *termdv1.CheckPolicyRequest) (*termdv1.CheckPolicyResponse, error) {
	d, canon, err := s.b.CheckPolicy(ctx, who(ctx), r.Request)
	return &termdv1.CheckPolicyResponse{Decision: d, CanonicalRequest: canon}, err
}

func (s policySvc) GetPolicy(ctx context.Context, _ *termdv1.GetPolicyRequest) (*termdv1.GetPolicyResponse, error) {
	return s.b.GetPolicy(), nil
}

func (s policySvc) ListCredentials(ctx context.Context, _ *termdv1.ListCredentialsRequest) (*termdv1.ListCredentialsResponse, error) {
	cs, err := s.b.ListCredentials(ctx, who(ctx))
	return &termdv1.ListCredentialsResponse{Credentials: cs}, err
}

func (s policySvc) ReloadPolicy(ctx context.Context, _ *termdv1.ReloadPolicyRequest) (*termdv1.ReloadPolicyResponse, error) {
	return s.b.ReloadPolicy()
}

type grantSvc struct {
	termdv1.UnimplementedGrantServiceServer
	b *broker.Broker
}

func (s grantSvc) ListGrants(ctx context.Context, r *termdv1.ListGrantsRequest) (*termdv1.ListGrantsResponse, error) {
	gs, err := s.b.ListGrants(ctx, who(ctx), r.All, r.SessionId)
	return &termdv1.ListGrantsResponse{Grants: gs}, err
}

func (s grantSvc) RevokeGrant(ctx context.Context, r *termdv1.RevokeGrantRequest) (*termdv1.RevokeGrantResponse, error) {
	g, err := s.b.RevokeGrant(ctx, who(ctx), r.GrantId)
	return &termdv1.RevokeGrantResponse{Grant: g}, err
}

type adviserSvc struct {
	termdv1.UnimplementedAdviserServiceServer
	b *broker.Broker
}

func (s adviserSvc) Advise(r *termdv1.AdviseRequest, st grpc.ServerStreamingServer[termdv1.AdviseResponse]) error {
	return stream(r, st, s.b.Advise)
}

type workspaceSvc struct {
	termdv1.UnimplementedWorkspaceServiceServer
	b *broker.Broker
}

func (s workspaceSvc) ListWorkspaceFiles(ctx context.Context, r *termdv1.ListWorkspaceFilesRequest) (*termdv1.ListWorkspaceFilesResponse, error) {
	return s.b.ListWorkspaceFiles(ctx, who(ctx), r)
}

func (s workspaceSvc) ReadWorkspaceFile(ctx context.Context, r *termdv1.ReadWorkspaceFileRequest) (*termdv1.ReadWorkspaceFileResponse, error) {
	return s.b.ReadWorkspaceFile(ctx, who(ctx), r.Path)
}
