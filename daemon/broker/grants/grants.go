package grants

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

const (
	defaultWorkspaceTTL = 7 * 24 * time.Hour
	keepEndedGrants     = 7 * 24 * time.Hour
	statusActive        = "active"
	statusRevoked       = "revoked"
	statusExpired       = "expired"
	lapsedPrefix        = "lapsed: "
)

// Host is what the grants need of the broker; called with its lock held.
type Host interface {
	Config() *config.Config
	Now() time.Time
	// Policy is the policy in force.
	Policy() *policy.Policy
	Redact(s string) string
	Log() *slog.Logger
	// SessionOpen says whether session id exists and is not closed.
	SessionOpen(id string) bool
	// ProjectPolicy says whether v is the version of a workspace's
	// narrowed policy (a grant made under a project policy).
	ProjectPolicy(v string) bool
	// WorkspaceOf is the workspace root that holds dir ("" when none does).
	WorkspaceOf(dir string) string
	// Journal records a grant: durably (sync: made or revoked), or lazily
	// (a use: losing it in a crash loses only a count).
	Journal(g *Grant, sync bool) error
}

// Grants are the grants made (and ended ones for a week).
type Grants struct {
	host Host
	byID map[string]*Grant
}

// New returns an empty set of grants.
func New(host Host) *Grants { return &Grants{host: host, byID: map[string]*Grant{}} }

// Grant is a grant and what it matches.
type Grant struct {
	g       *termdv1.Grant // as shown (pattern redacted)
	pattern policy.Pattern // nil for the exact-request scope
	bind    policy.GrantBinding
	// JournalBytes is the size of its current journal record (kept by the
	// broker's journal).
	JournalBytes int64
}

// Plan is what a grant is made from: the plan an operator approves.
type Plan struct {
	ID, SessionID string
	Requester     *termdv1.Principal
	Request       policy.Request
	Decision      policy.Decision // unredacted
	Risk          termdv1.Risk    // Decision.Risk in the API's form
}

func scopeWord(s termdv1.GrantScope) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.String(), "GRANT_SCOPE_")), "_", "-")
}

// requestArgv is the argv a request names (a command string split as the
// policy splits it).
func requestArgv(req policy.Request) []string {
	if len(req.Argv) > 0 {
		return req.Argv
	}
	argv, _ := cmdline.Split(req.Command)
	return argv
}

// Make builds (and checks) the grant an operator asks for while approving
// plan p; nil for an approval of this plan once. Store makes it durable
// once the approval is.
func (s *Grants) Make(caller *termdv1.Principal, p Plan, spec *termdv1.GrantSpec) (*Grant, error) {
	scope := spec.GetScope()
	ttl, remember, err := s.ttl(spec)
	if err != nil || !remember {
		return nil, err
	}
	now := s.host.Now()
	d := p.Decision
	bind := policy.BindingOf(d)
	bind.Env = p.Request.Env // the plan's decision holds redacted values
	g := &termdv1.Grant{
		Id:             "g-" + uuid.NewString()[:13],
		Scope:          scope,
		Principal:      proto.Clone(p.Requester).(*termdv1.Principal),
		CreatedBy:      proto.Clone(caller).(*termdv1.Principal),
		CreatedAt:      timestamppb.New(now),
		ExpiresAt:      timestamppb.New(now.Add(ttl)),
		SessionId:      p.SessionID,
		ProgramPath:    d.ResolvedPath,
		ProgramSha256:  d.BinarySHA256,
		PolicyVersion:  d.PolicyVersion,
		SandboxProfile: d.Sandbox.Profile,
		RuleIds:        slices.Clone(d.Rules),
		Risk:           p.Risk,
		PlanId:         p.ID,
		Status:         statusActive,
	}
	rec := &Grant{g: g, bind: bind}
	if scope == termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST || scope == termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST {
		g.RequestHash = d.RequestHash
	} else {
		pt, err := s.host.Policy().ParsePattern(spec.GetPattern(), requestArgv(p.Request))
		if err != nil {
			return nil, errdefs.Invalid("%v", err)
		}
		rec.pattern = pt
		g.Pattern = s.host.Redact(pt.String())
	}
	if scope != termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST {
		g.Workspace = s.host.WorkspaceOf(p.Request.Cwd)
		if g.Workspace == "" {
			return nil, errdefs.Precondition("plan %s does not run in a workspace; a %s grant needs one", p.ID, scopeWord(scope))
		}
	}
	if scope == termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN || scope == termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST {
		g.SessionId = ""
	}
	return rec, nil
}

// ttl checks a grant spec and says how long its grant lasts; remember is
// false when it asks for no grant (an approval of the plan once).
func (s *Grants) ttl(spec *termdv1.GrantSpec) (ttl time.Duration, remember bool, err error) {
	scope := spec.GetScope()
	const scopes = "once, session-request, session-pattern, workspace-request or workspace-pattern"
	switch scope {
	case termdv1.GrantScope_GRANT_SCOPE_UNSPECIFIED, termdv1.GrantScope_GRANT_SCOPE_ONCE:
		if spec.GetPattern() != "" || spec.GetTtlSeconds() != 0 {
			return 0, false, errdefs.Invalid("a pattern or ttl needs a scope that remembers the approval: session-request, session-pattern, workspace-request or workspace-pattern")
		}
		return 0, false, nil
	case termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST, termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST:
		if spec.GetPattern() != "" {
			return 0, false, errdefs.Invalid("scope %s covers this exact request; use session-pattern or workspace-pattern for a pattern", scopeWord(scope))
		}
	case termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN, termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN:
	default:
		return 0, false, errdefs.Invalid("unknown grant scope %v (want %s)", scope, scopes)
	}
	ttl = time.Duration(spec.GetTtlSeconds()) * time.Second
	approvals := s.host.Config().Approvals
	maxTTL := approvals.MaxGrantTTL.D()
	if ttl > maxTTL {
		return 0, false, errdefs.Invalid("a grant lasts at most %s (approvals.max_grant_ttl); ttl %s is longer", ttlWords(maxTTL), ttl)
	}
	if ttl == 0 {
		switch scope {
		case termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN:
			ttl = min(defaultWorkspaceTTL, maxTTL)
		case termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST:
			ttl = approvals.WorkspaceGrantTTL.D()
		default:
			ttl = maxTTL // session scopes end with the session anyway
		}
	}
	return ttl, true, nil
}

// ttlWords is a grant lifetime as people say it: "30 days", "8h0m0s".
func ttlWords(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// Store records a new grant durably and makes it active.
func (s *Grants) Store(rec *Grant) (*termdv1.Grant, error) {
	g := rec.g
	if err := s.host.Journal(rec, true); err != nil {
		return nil, errdefs.Internal("the grant could not be recorded durably (%v); the plan is approved once, no grant was made", err)
	}
	s.byID[g.Id] = rec
	s.host.Log().Info("grant made", "grant", g.Id, "scope", scopeWord(g.Scope), "pattern", g.Pattern, "by", g.CreatedBy.GetName(), "for", g.Principal.GetName())
	return proto.Clone(g).(*termdv1.Grant), nil
}

// status is a grant's status now: active, revoked, expired (also when its
// session ended), or lapsed with why (the policy changed).
func (s *Grants) status(r *Grant) string {
	g := r.g
	switch {
	case g.RevokedAt != nil:
		return statusRevoked
	case !s.host.Now().Before(g.ExpiresAt.AsTime()):
		return statusExpired
	}
	if g.SessionId != "" && !s.host.SessionOpen(g.SessionId) {
		return statusExpired
	}
	if v := s.host.Policy().Version(); v != r.bind.PolicyVersion && !s.host.ProjectPolicy(r.bind.PolicyVersion) {
		return lapsedPrefix + "the policy changed since the grant was made"
	}
	return statusActive
}

// uncovered says why grant r does not approve a new plan of requester in
// session sessionID decided as d, or "" when it does. d is the unredacted
// decision.
func (s *Grants) uncovered(r *Grant, requester *termdv1.Principal, sessionID string, d policy.Decision) string {
	g := r.g
	if st := s.status(r); st != statusActive {
		return "grant " + g.Id + " is " + st
	}
	if domain.PrincipalKey(requester) != domain.PrincipalKey(g.Principal) {
		return "grant " + g.Id + " covers another principal"
	}
	if g.SessionId != "" && sessionID != g.SessionId {
		return "grant " + g.Id + " belongs to another session"
	}
	switch {
	case g.RequestHash != "":
		if d.RequestHash != g.RequestHash {
			return "not the granted request"
		}
	case !r.pattern.Matches(d.Argv):
		return "the command does not fit " + g.Pattern
	}
	if g.Workspace != "" && s.host.WorkspaceOf(d.Cwd) != g.Workspace {
		return "it runs outside the granted workspace " + g.Workspace
	}
	if why := r.bind.Uncovered(d); why != "" {
		return "grant " + g.Id + ": " + why
	}
	return ""
}

// Cover finds an active grant that approves a new plan, or nil. d is the
// plan's unredacted decision; only one that asks can be covered.
func (s *Grants) Cover(requester *termdv1.Principal, sessionID string, d policy.Decision) *Grant {
	if d.Verdict != policy.Ask || d.Privileged || len(s.byID) == 0 {
		return nil
	}
	var best *Grant
	for _, r := range s.byID {
		if s.uncovered(r, requester, sessionID, d) != "" {
			continue
		}
		if best == nil || r.g.CreatedAt.AsTime().Before(best.g.CreatedAt.AsTime()) {
			best = r
		}
	}
	return best
}

// Approve approves a new plan with the grant that covers it.
func (s *Grants) Approve(p *termdv1.Plan, r *Grant, now time.Time) {
	g := r.g
	exp := now.Add(s.host.Config().Approvals.TTL.D())
	p.GrantId = g.Id
	p.Approval = &termdv1.Approval{Approver: proto.Clone(g.CreatedBy).(*termdv1.Principal), ApprovedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(exp), RequestHash: p.Decision.GetRequestHash()}
	p.ExpiresAt = timestamppb.New(exp)
	g.Uses++
	g.LastUsedAt = timestamppb.New(now)
	_ = s.host.Journal(r, false)
}

// StillCovers re-checks, before a plan grant id approved runs, that the
// grant still covers its fresh decision (it may have been revoked).
func (s *Grants) StillCovers(id string, requester *termdv1.Principal, sessionID string, fresh policy.Decision) string {
	r, ok := s.byID[id]
	if !ok {
		return "grant " + id + " no longer exists"
	}
	return s.uncovered(r, requester, sessionID, fresh)
}

// List lists grants; operators and viewers see all, agents their own.
func (s *Grants) List(caller *termdv1.Principal, all bool, sessionID string) []*termdv1.Grant {
	var out []*termdv1.Grant
	for _, r := range s.byID {
		if !domain.Visible(caller, r.g.Principal) || (sessionID != "" && r.g.SessionId != sessionID) {
			continue
		}
		g := proto.Clone(r.g).(*termdv1.Grant)
		g.Status = s.status(r)
		if !all && g.Status != statusActive {
			continue
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].Status == statusActive) != (out[j].Status == statusActive) {
			return out[i].Status == statusActive
		}
		return out[i].CreatedAt.AsTime().After(out[j].CreatedAt.AsTime())
	})
	return out
}

// Revoke ends a grant at once (operators only).
func (s *Grants) Revoke(caller *termdv1.Principal, id string) (*termdv1.Grant, error) {
	if !domain.IsOperator(caller) {
		return nil, errdefs.Permission("only operators revoke grants")
	}
	if id == "" {
		return nil, errdefs.Invalid("grant_id is empty; see `termctl grants list`")
	}
	r, ok := s.byID[id]
	if !ok {
		return nil, errdefs.NotFound("grant %s not found (see `termctl grants list --all`)", id)
	}
	if r.g.RevokedAt != nil {
		return nil, errdefs.Precondition("grant %s was already revoked by %s", id, r.g.RevokedBy.GetName())
	}
	r.g.RevokedAt = timestamppb.New(s.host.Now())
	r.g.RevokedBy = proto.Clone(caller).(*termdv1.Principal)
	if err := s.host.Journal(r, true); err != nil {
		r.g.RevokedAt, r.g.RevokedBy = nil, nil
		return nil, errdefs.Internal("the revocation could not be recorded durably (%v); the grant stays active, try again", err)
	}
	s.host.Log().Info("grant revoked", "grant", id, "by", caller.Name)
	g := proto.Clone(r.g).(*termdv1.Grant)
	g.Status = statusRevoked
	return g, nil
}

// match is what a grant's journal record holds besides the grant.
type match struct {
	Pattern policy.Pattern      `json:"pattern,omitempty"`
	Binding policy.GrantBinding `json:"binding"`
}

var (
	pjm = protojson.MarshalOptions{UseProtoNames: true}
	pju = protojson.UnmarshalOptions{DiscardUnknown: false}
)

// Record is the grant's journal record: the grant (protojson) and what it
// matches (its pattern and binding, JSON).
func (r *Grant) Record() (grant, matches json.RawMessage, err error) {
	if grant, err = pjm.Marshal(r.g); err != nil {
		return nil, nil, err
	}
	if matches, err = json.Marshal(match{Pattern: r.pattern, Binding: r.bind}); err != nil {
		return nil, nil, err
	}
	return grant, matches, nil
}

// Restore replays a grant's journal record (the latest wins).
func (s *Grants) Restore(grant, matches json.RawMessage) error {
	g := &termdv1.Grant{}
	if err := pju.Unmarshal(grant, g); err != nil {
		return fmt.Errorf("bad grant record: %w", err)
	}
	var m match
	if err := json.Unmarshal(matches, &m); err != nil {
		return fmt.Errorf("bad grant record %s: %w", g.Id, err)
	}
	if g.RequestHash == "" && len(m.Pattern) == 0 {
		return fmt.Errorf("grant record %s has neither a request hash nor a pattern", g.Id)
	}
	s.byID[g.Id] = &Grant{g: g, pattern: m.Pattern, bind: m.Binding}
	return nil
}

// Compact passes the grants worth keeping in a compacted journal to emit,
// in id order, and forgets the others: ended ones stay a week so `termctl
// grants list --all` can still show them.
func (s *Grants) Compact(emit func(*Grant) error) error {
	ids := make([]string, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	now := s.host.Now()
	for _, id := range ids {
		r := s.byID[id]
		end := r.g.ExpiresAt.AsTime()
		if r.g.RevokedAt != nil {
			end = r.g.RevokedAt.AsTime()
		}
		if now.Sub(end) > keepEndedGrants {
			delete(s.byID, id)
			continue
		}
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}
