package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Grants are remembered approvals: an operator approving a plan may let the
// approval stand for this exact request for the rest of the session or, in
// its workspace, from any session of the principal for a bounded time (so it
// survives an MCP client's restart), or for a pattern of requests
// (`git commit -m <any>`) in the session or the workspace, until it expires. A new plan that the policy decides "ask" is
// approved by a grant that covers it: same principal, same session or
// workspace, a request that fits the pattern, and a fresh decision inside the
// grant's binding (program path and hash, policy version, entry files,
// sandbox profile, rules, risk; policy.GrantBinding). The grant is checked
// again when the plan executes. Grants are journalled, so they survive a
// restart; revoking one ends it at once.

const (
	defaultWorkspaceTTL  = 7 * 24 * time.Hour
	keepEndedGrants      = 7 * 24 * time.Hour
	grantStatusActive    = "active"
	grantStatusRevoked   = "revoked"
	grantStatusExpired   = "expired"
	grantLapsedPrefix    = "lapsed: "
	grantJournalKindName = "grant"
)

// grantRec is a grant and what it matches. Guarded by Broker.mu.
type grantRec struct {
	g       *termdv1.Grant // as shown (pattern redacted)
	pattern policy.Pattern // nil for the exact-request scope
	bind    policy.GrantBinding
	jbytes  int64 // size of its current journal record (journal.fmu)
}

// grantJournal is a grant's journal record.
type grantJournal struct {
	Pattern policy.Pattern      `json:"pattern,omitempty"`
	Binding policy.GrantBinding `json:"binding"`
}

func scopeWord(s termdv1.GrantScope) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.String(), "GRANT_SCOPE_")), "_", "-")
}

// workspaceOf is the workspace root that holds dir ("" when none does).
func (b *Broker) workspaceOf(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	for _, ws := range b.Config().Workspaces {
		if dir == ws || strings.HasPrefix(dir, strings.TrimSuffix(ws, "/")+"/") {
			return ws
		}
	}
	return ""
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

// newGrantLocked builds (and checks) the grant an operator asks for while
// approving plan p; nil for an approval of this plan once. storeGrantLocked
// makes it durable once the approval is.
func (b *Broker) newGrantLocked(caller *termdv1.Principal, p *planRec, spec *termdv1.GrantSpec) (*grantRec, error) {
	scope := spec.GetScope()
	const scopes = "once, session-request, session-pattern, workspace-request or workspace-pattern"
	switch scope {
	case termdv1.GrantScope_GRANT_SCOPE_UNSPECIFIED, termdv1.GrantScope_GRANT_SCOPE_ONCE:
		if spec.GetPattern() != "" || spec.GetTtlSeconds() != 0 {
			return nil, errdefs.Invalid("a pattern or ttl needs a scope that remembers the approval: session-request, session-pattern, workspace-request or workspace-pattern")
		}
		return nil, nil
	case termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST, termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST:
		if spec.GetPattern() != "" {
			return nil, errdefs.Invalid("scope %s covers this exact request; use session-pattern or workspace-pattern for a pattern", scopeWord(scope))
		}
	case termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN, termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN:
	default:
		return nil, errdefs.Invalid("unknown grant scope %v (want %s)", scope, scopes)
	}
	ttl := time.Duration(spec.GetTtlSeconds()) * time.Second
	maxTTL := b.Config().Approvals.MaxGrantTTL.D()
	if ttl > maxTTL {
		return nil, errdefs.Invalid("a grant lasts at most %s (approvals.max_grant_ttl); ttl %s is longer", ttlWords(maxTTL), ttl)
	}
	if ttl == 0 {
		switch scope {
		case termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN:
			ttl = min(defaultWorkspaceTTL, maxTTL)
		case termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST:
			ttl = b.Config().Approvals.WorkspaceGrantTTL.D()
		default:
			ttl = maxTTL // session scopes end with the session anyway
		}
	}
	now := b.Now()
	d := p.dec
	bind := policy.BindingOf(d)
	bind.Env = p.req.Env // the plan's decision holds redacted values
	g := &termdv1.Grant{
		Id:             "g-" + uuid.NewString()[:13],
		Scope:          scope,
		Principal:      proto.Clone(p.p.Requester).(*termdv1.Principal),
		CreatedBy:      proto.Clone(caller).(*termdv1.Principal),
		CreatedAt:      timestamppb.New(now),
		ExpiresAt:      timestamppb.New(now.Add(ttl)),
		SessionId:      p.session.id,
		ProgramPath:    d.ResolvedPath,
		ProgramSha256:  d.BinarySHA256,
		PolicyVersion:  d.PolicyVersion,
		SandboxProfile: d.Sandbox.Profile,
		RuleIds:        slices.Clone(d.Rules),
		Risk:           riskProto(d.Risk),
		PlanId:         p.p.Id,
		Status:         grantStatusActive,
	}
	rec := &grantRec{g: g, bind: bind}
	if scope == termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST || scope == termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST {
		g.RequestHash = d.RequestHash
	} else {
		pt, err := b.Policy.Current().ParsePattern(spec.GetPattern(), requestArgv(p.req))
		if err != nil {
			return nil, errdefs.Invalid("%v", err)
		}
		rec.pattern = pt
		g.Pattern = b.Redactor.Redact(pt.String())
	}
	if scope != termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST {
		g.Workspace = b.workspaceOf(p.req.Cwd)
		if g.Workspace == "" {
			return nil, errdefs.Precondition("plan %s does not run in a workspace; a %s grant needs one", p.p.Id, scopeWord(scope))
		}
	}
	if scope == termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN || scope == termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_REQUEST {
		g.SessionId = ""
	}
	return rec, nil
}

// ttlWords is a grant lifetime as people say it: "30 days", "8h0m0s".
func ttlWords(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// storeGrantLocked records a new grant durably and makes it active.
func (b *Broker) storeGrantLocked(rec *grantRec) (*termdv1.Grant, error) {
	g := rec.g
	if err := b.journalGrantLocked(rec); err != nil {
		return nil, errdefs.Internal("the grant could not be recorded durably (%v); the plan is approved once, no grant was made", err)
	}
	b.grants[g.Id] = rec
	b.Log.Info("grant made", "grant", g.Id, "scope", scopeWord(g.Scope), "pattern", g.Pattern, "by", g.CreatedBy.GetName(), "for", g.Principal.GetName())
	return proto.Clone(g).(*termdv1.Grant), nil
}

// statusLocked is a grant's status now: active, revoked, expired (also when
// its session ended), or lapsed with why (the policy changed).
func (b *Broker) grantStatusLocked(r *grantRec) string {
	g := r.g
	switch {
	case g.RevokedAt != nil:
		return grantStatusRevoked
	case !b.Now().Before(g.ExpiresAt.AsTime()):
		return grantStatusExpired
	}
	if g.SessionId != "" {
		if s, ok := b.sessions[g.SessionId]; !ok || s.closed {
			return grantStatusExpired
		}
	}
	if v := b.Policy.Current().Version(); v != r.bind.PolicyVersion && !b.projectPolicyVersion(r.bind.PolicyVersion) {
		return grantLapsedPrefix + "the policy changed since the grant was made"
	}
	return grantStatusActive
}

// projectPolicyVersion reports whether v is the version of a workspace's
// narrowed policy (a grant made under a project policy).
func (b *Broker) projectPolicyVersion(v string) bool {
	for _, pp := range b.projects {
		if pp.pol != nil && pp.pol.Version() == v {
			return true
		}
	}
	return false
}

// coversLocked says why grant r does not approve a new plan of caller in
// session s decided as d, or "" when it does. d is the unredacted decision.
func (b *Broker) grantUncoveredLocked(r *grantRec, requester *termdv1.Principal, s *session, d policy.Decision) string {
	g := r.g
	if st := b.grantStatusLocked(r); st != grantStatusActive {
		return "grant " + g.Id + " is " + st
	}
	if domain.PrincipalKey(requester) != domain.PrincipalKey(g.Principal) {
		return "grant " + g.Id + " covers another principal"
	}
	if g.SessionId != "" && s.id != g.SessionId {
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
	if g.Workspace != "" && b.workspaceOf(d.Cwd) != g.Workspace {
		return "it runs outside the granted workspace " + g.Workspace
	}
	if why := r.bind.Uncovered(d); why != "" {
		return "grant " + g.Id + ": " + why
	}
	return ""
}

// coverLocked finds an active grant that approves a new plan, or nil. d is
// the plan's unredacted decision; only one that asks can be covered.
func (b *Broker) coverLocked(requester *termdv1.Principal, s *session, d policy.Decision) *grantRec {
	if d.Verdict != policy.Ask || d.Privileged || len(b.grants) == 0 {
		return nil
	}
	var best *grantRec
	for _, r := range b.grants {
		if b.grantUncoveredLocked(r, requester, s, d) != "" {
			continue
		}
		if best == nil || r.g.CreatedAt.AsTime().Before(best.g.CreatedAt.AsTime()) {
			best = r
		}
	}
	return best
}

// approveByGrantLocked approves a new plan with the grant that covers it.
func (b *Broker) approveByGrantLocked(p *termdv1.Plan, r *grantRec, now time.Time) {
	g := r.g
	exp := now.Add(b.Config().Approvals.TTL.D())
	p.GrantId = g.Id
	p.Approval = &termdv1.Approval{Approver: proto.Clone(g.CreatedBy).(*termdv1.Principal), ApprovedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(exp), RequestHash: p.Decision.GetRequestHash()}
	p.ExpiresAt = timestamppb.New(exp)
	g.Uses++
	g.LastUsedAt = timestamppb.New(now)
	_ = b.journalGrantLazy(r)
}

// grantStillCovers re-checks, before a plan a grant approved runs, that the
// grant still covers its fresh decision (it may have been revoked).
func (b *Broker) grantStillCovers(p *planRec, fresh policy.Decision) string {
	b.mu.Lock()
	defer b.unlock()
	r, ok := b.grants[p.p.GrantId]
	if !ok {
		return "grant " + p.p.GrantId + " no longer exists"
	}
	return b.grantUncoveredLocked(r, p.p.Requester, p.session, fresh)
}

// ListGrants lists grants; operators and viewers see all, agents their own.
func (b *Broker) ListGrants(_ context.Context, caller *termdv1.Principal, all bool, sessionID string) ([]*termdv1.Grant, error) {
	b.mu.Lock()
	defer b.unlock()
	var out []*termdv1.Grant
	for _, r := range b.grants {
		if !domain.Visible(caller, r.g.Principal) || (sessionID != "" && r.g.SessionId != sessionID) {
			continue
		}
		g := proto.Clone(r.g).(*termdv1.Grant)
		g.Status = b.grantStatusLocked(r)
		if !all && g.Status != grantStatusActive {
			continue
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].Status == grantStatusActive) != (out[j].Status == grantStatusActive) {
			return out[i].Status == grantStatusActive
		}
		return out[i].CreatedAt.AsTime().After(out[j].CreatedAt.AsTime())
	})
	return out, nil
}

// RevokeGrant ends a grant at once (operators only).
func (b *Broker) RevokeGrant(_ context.Context, caller *termdv1.Principal, id string) (out *termdv1.Grant, err error) {
	if !domain.IsOperator(caller) {
		return nil, errdefs.Permission("only operators revoke grants")
	}
	b.mu.Lock()
	defer func() {
		if serr := b.unlockDurable(); serr != nil && err == nil {
			out, err = nil, errdefs.Internal("the revocation could not be recorded durably (%v); revoke it again", serr)
		}
	}()
	if id == "" {
		return nil, errdefs.Invalid("grant_id is empty; see `termctl grants list`")
	}
	r, ok := b.grants[id]
	if !ok {
		return nil, errdefs.NotFound("grant %s not found (see `termctl grants list --all`)", id)
	}
	if r.g.RevokedAt != nil {
		return nil, errdefs.Precondition("grant %s was already revoked by %s", id, r.g.RevokedBy.GetName())
	}
	r.g.RevokedAt = timestamppb.New(b.Now())
	r.g.RevokedBy = proto.Clone(caller).(*termdv1.Principal)
	if err := b.journalGrantLocked(r); err != nil {
		r.g.RevokedAt, r.g.RevokedBy = nil, nil
		return nil, errdefs.Internal("the revocation could not be recorded durably (%v); the grant stays active, try again", err)
	}
	b.Log.Info("grant revoked", "grant", id, "by", caller.Name)
	g := proto.Clone(r.g).(*termdv1.Grant)
	g.Status = grantStatusRevoked
	return g, nil
}

// journalGrantLocked durably records a grant (made or revoked).
func (b *Broker) journalGrantLocked(r *grantRec) error { return b.journalGrant(r, true) }

// journalGrantLazy records a use; losing it in a crash loses only a count.
func (b *Broker) journalGrantLazy(r *grantRec) error { return b.journalGrant(r, false) }

func (b *Broker) journalGrant(r *grantRec, sync bool) error {
	rec, err := grantRecord(r)
	if err != nil {
		return err
	}
	return b.journalAppend(rec, sync, &r.jbytes)
}

func grantRecord(r *grantRec) (journalRecord, error) {
	data, err := pjm.Marshal(r.g)
	if err != nil {
		return journalRecord{}, err
	}
	raw, err := json.Marshal(grantJournal{Pattern: r.pattern, Binding: r.bind})
	if err != nil {
		return journalRecord{}, err
	}
	return journalRecord{Kind: grantJournalKindName, Grant: data, GrantMatch: raw}, nil
}

// restoreGrant replays a grant's journal record (the latest wins).
func (b *Broker) restoreGrant(rec journalRecord) error {
	g := &termdv1.Grant{}
	if err := pju.Unmarshal(rec.Grant, g); err != nil {
		return fmt.Errorf("bad grant record: %w", err)
	}
	var m grantJournal
	if err := json.Unmarshal(rec.GrantMatch, &m); err != nil {
		return fmt.Errorf("bad grant record %s: %w", g.Id, err)
	}
	if g.RequestHash == "" && len(m.Pattern) == 0 {
		return fmt.Errorf("grant record %s has neither a request hash nor a pattern", g.Id)
	}
	b.grants[g.Id] = &grantRec{g: g, pattern: m.Pattern, bind: m.Binding}
	return nil
}

// compactGrantsLocked writes the grants worth keeping into a compacted
// journal (emit): ended ones stay a week so `termctl grants list --all` can
// still show them.
func (b *Broker) compactGrantsLocked(emit func(line []byte, slot *int64) error) error {
	ids := make([]string, 0, len(b.grants))
	for id := range b.grants {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	now := b.Now()
	for _, id := range ids {
		r := b.grants[id]
		end := r.g.ExpiresAt.AsTime()
		if r.g.RevokedAt != nil {
			end = r.g.RevokedAt.AsTime()
		}
		if now.Sub(end) > keepEndedGrants {
			delete(b.grants, id)
			continue
		}
		rec, err := grantRecord(r)
		if err != nil {
			return err
		}
		line, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := emit(append(line, '\n'), &r.jbytes); err != nil {
			return err
		}
	}
	return nil
}
