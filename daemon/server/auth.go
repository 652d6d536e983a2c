package server

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/internal/wire"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// minRole is the weakest role allowed to call each method. A method missing
// here is refused: new RPCs must be placed deliberately.
var minRole = map[string]config.Role{
	"/termd.v1.DaemonService/GetStatus":  config.RoleViewer,
	"/termd.v1.DaemonService/GetVersion": config.RoleViewer,

	"/termd.v1.SessionService/CreateSession": config.RoleAgent,
	"/termd.v1.SessionService/GetSession":    config.RoleViewer,
	"/termd.v1.SessionService/ListSessions":  config.RoleViewer,
	"/termd.v1.SessionService/CloseSession":  config.RoleAgent,

	"/termd.v1.PlanService/CreatePlan":  config.RoleAgent,
	"/termd.v1.PlanService/GetPlan":     config.RoleViewer,
	"/termd.v1.PlanService/ListPlans":   config.RoleViewer,
	"/termd.v1.PlanService/ApprovePlan": config.RoleOperator,
	"/termd.v1.PlanService/DenyPlan":    config.RoleOperator,
	"/termd.v1.PlanService/Replan":      config.RoleAgent,

	"/termd.v1.ExecutionService/Execute":         config.RoleAgent,
	"/termd.v1.ExecutionService/ExecuteAndWait":  config.RoleAgent,
	"/termd.v1.ExecutionService/GetExecution":    config.RoleViewer,
	"/termd.v1.ExecutionService/PauseExecution":  config.RoleAgent,
	"/termd.v1.ExecutionService/ResumeExecution": config.RoleAgent,
	"/termd.v1.ExecutionService/CancelExecution": config.RoleAgent,
	"/termd.v1.ExecutionService/ReadOutput":      config.RoleViewer,
	"/termd.v1.ExecutionService/ListExecutions":  config.RoleViewer,

	"/termd.v1.EventService/StreamEvents": config.RoleViewer,

	"/termd.v1.ReceiptService/GetReceipt":       config.RoleViewer,
	"/termd.v1.ReceiptService/ListReceipts":     config.RoleViewer,
	"/termd.v1.ReceiptService/ExportReceipt":    config.RoleViewer,
	"/termd.v1.ReceiptService/ExportReceipts":   config.RoleViewer,
	"/termd.v1.ReceiptService/VerifyReceipt":    config.RoleViewer,
	"/termd.v1.ReceiptService/GetPublicKey":     config.RoleViewer,
	"/termd.v1.ReceiptService/VerifyAuditChain": config.RoleViewer,
	"/termd.v1.ReceiptService/PruneReceipts":    config.RoleOperator,
	"/termd.v1.ReceiptService/SearchReceipts":   config.RoleViewer,
	"/termd.v1.ReceiptService/ReindexReceipts":  config.RoleOperator,

	"/termd.v1.PolicyService/CheckPolicy":  config.RoleViewer,
	"/termd.v1.PolicyService/GetPolicy":    config.RoleViewer,
	"/termd.v1.PolicyService/ReloadPolicy": config.RoleOperator,
	// Operators see every credential, agents the ones they may ask for,
	// viewers (who cannot plan) none.
	"/termd.v1.PolicyService/ListCredentials": config.RoleViewer,
	// Linting checks a text and installs nothing (like ValidateRecipe).
	"/termd.v1.PolicyService/LintPolicy": config.RoleViewer,

	"/termd.v1.AdviserService/Advise": config.RoleAgent,

	"/termd.v1.GrantService/ListGrants":  config.RoleViewer,
	"/termd.v1.GrantService/RevokeGrant": config.RoleOperator,

	"/termd.v1.RecipeService/ListRecipes":    config.RoleViewer,
	"/termd.v1.RecipeService/GetRecipe":      config.RoleViewer,
	"/termd.v1.RecipeService/ValidateRecipe": config.RoleViewer,
	"/termd.v1.RecipeService/RunRecipe":      config.RoleAgent,

	// Who may type or take over is decided per terminal by the broker.
	"/termd.v1.TerminalService/AttachTerminal": config.RoleViewer,
	"/termd.v1.TerminalService/SendInput":      config.RoleAgent,
	"/termd.v1.TerminalService/GetScreen":      config.RoleViewer,
	"/termd.v1.TerminalService/ResizeTerminal": config.RoleAgent,
	"/termd.v1.TerminalService/TakeInput":      config.RoleAgent,
	"/termd.v1.TerminalService/ReleaseInput":   config.RoleAgent,

	// An agent forwards into and lists its own loopbacks; operators see and close every forward.
	"/termd.v1.PortForwardService/PortForward":      config.RoleAgent,
	"/termd.v1.PortForwardService/ListPortForwards": config.RoleViewer,
	"/termd.v1.PortForwardService/ClosePortForward": config.RoleAgent,

	"/termd.v1.WorkspaceService/ListWorkspaceFiles": config.RoleAgent,
	"/termd.v1.WorkspaceService/ReadWorkspaceFile":  config.RoleAgent,
}

type principalKey struct{}

// PrincipalFrom returns the authenticated caller of a request.
func PrincipalFrom(ctx context.Context) *termdv1.Principal {
	p, _ := ctx.Value(principalKey{}).(*termdv1.Principal)
	return p
}

// WithPrincipal attaches a principal to ctx (used by tests of the domain layer).
func WithPrincipal(ctx context.Context, p *termdv1.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// roleProto is r in the API: the proto enum value named ROLE_ and r's word
// (ROLE_UNSPECIFIED for none).
func roleProto(r config.Role) termdv1.Role {
	return termdv1.Role(termdv1.Role_value["ROLE_"+strings.ToUpper(r.String())])
}

var viaRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// identity is who a connection is, before the call's metadata.
type identity struct {
	role     config.Role
	name     string
	uid, gid uint32
	pid      int32
	// mayName: the caller may name the person it acts for (x-termd-name).
	mayName bool
	// cert is the listen_tls.clients entry of a mutual-TLS caller.
	cert string
	// gateway: cert is a gateway's, and a name it gives is recorded with it.
	gateway bool
}

// authenticate turns peer credentials, or a verified client certificate,
// (plus optional downgrade metadata) into a principal.
func (s *Server) authenticate(ctx context.Context, method string) (context.Context, error) {
	if strings.HasPrefix(method, "/grpc.health.v1.") || strings.HasPrefix(method, "/grpc.reflection.") {
		return ctx, nil
	}
	cfg := s.cfg()
	var id identity
	if pi, ok := PeerFrom(ctx); ok {
		role := cfg.RoleOf(pi.UID, pi.GID)
		id = identity{role: role, name: config.UserName(pi.UID), uid: pi.UID, gid: pi.GID, pid: pi.PID, mayName: role == config.RoleOperator}
	} else if ti, ok := tlsFrom(ctx); ok {
		var err error
		if id, err = s.tlsIdentity(ti); err != nil {
			return nil, err
		}
		id.mayName = id.gateway
	} else {
		return nil, status.Error(codes.Unauthenticated, "no peer credentials on this connection; connect over termd's unix socket or its mutual-TLS listener")
	}
	role, name, via, gateway := id.role, id.name, "", ""
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(wire.MDRole); len(v) > 0 {
			r, ok := config.RoleFromName(v[0])
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "%s metadata %q is not a role (operator, agent, viewer)", wire.MDRole, v[0])
			}
			if r < role { // only ever lower
				role = r
			}
		}
		if v := md.Get(wire.MDVia); len(v) > 0 {
			// Any caller may say which client it came through ("mcp",
			// "gateway"); the word is copied into sessions, plans, events and
			// receipts, so it must be a short word.
			if !viaRE.MatchString(v[0]) {
				return nil, status.Errorf(codes.InvalidArgument, "%s metadata must be a short word such as mcp or gateway (letters, digits, '-', at most 32)", wire.MDVia)
			}
			via = v[0]
		}
		if v := md.Get(wire.MDName); len(v) > 0 {
			switch {
			case id.cert != "" && !id.gateway:
				// Only a gateway's certificate speaks for someone else.
				return nil, status.Errorf(codes.PermissionDenied, "%s metadata names a person, which only a gateway's certificate may do; %s is not one (listen_tls.clients entry %s has no gateway: true)", wire.MDName, id.cert, id.cert)
			case id.cert != "":
				if err := personName(v[0]); err != nil {
					return nil, status.Errorf(codes.InvalidArgument, "%s metadata %v", wire.MDName, err)
				}
				name, gateway = v[0], id.cert
			case id.mayName:
				name = v[0]
			}
		}
	}
	if role == config.RoleNone {
		return nil, status.Errorf(codes.PermissionDenied, "uid %d has no role in termd's config (add it to roles.operators, roles.agents or roles.viewers)", id.uid)
	}
	need, known := minRole[method]
	if !known {
		return nil, status.Errorf(codes.Unimplemented, "method %s is not offered", method)
	}
	if role < need {
		return nil, status.Errorf(codes.PermissionDenied, "%s needs the %s role; you are %s (%s)", shortMethod(method), need, role, name)
	}
	p := &termdv1.Principal{Uid: id.uid, Gid: id.gid, Pid: id.pid, Name: name, Role: roleProto(role), Via: via, Cert: id.cert, Gateway: gateway}
	return WithPrincipal(ctx, p), nil
}

func shortMethod(m string) string {
	if i := strings.LastIndex(m, "/"); i >= 0 {
		return m[i+1:]
	}
	return m
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.authenticate(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	release, err := s.inflight.acquire(PrincipalFrom(ctx), s.cfg().Connections.CallsPerPrincipal)
	if err != nil {
		return nil, err
	}
	defer release()
	resp, err := h(ctx, req)
	return resp, toStatus(err)
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authedStream) Context() context.Context { return a.ctx }

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.authenticate(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return toStatus(h(srv, authedStream{ServerStream: ss, ctx: ctx}))
}

// inflight counts each principal's unary calls in flight, so a principal
// calling in a tight loop from many connections (ReadOutput, listings) gets
// its share of the daemon and no more.
type inflight struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *inflight) acquire(p *termdv1.Principal, max int) (release func(), err error) {
	if p == nil || p.GetRole() == termdv1.Role_ROLE_OPERATOR {
		return func() {}, nil
	}
	key := fmt.Sprintf("%d/%s/%s", p.GetUid(), p.GetCert(), p.GetName())
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	if f.n[key] >= max {
		return nil, status.Errorf(codes.ResourceExhausted, "%s already has %d calls in flight (connections.calls_per_principal); wait for them to finish, or raise connections.calls_per_principal in termd's config", p.GetName(), max)
	}
	f.n[key]++
	return func() {
		f.mu.Lock()
		if f.n[key]--; f.n[key] <= 0 {
			delete(f.n, key)
		}
		f.mu.Unlock()
	}, nil
}
