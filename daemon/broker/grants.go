package broker

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/termd/termd/daemon/broker/grants"
	"github.com/termd/termd/daemon/broker/wire"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Grants (remembered approvals) live in daemon/broker/grants; the broker
// guards them with b.mu, makes them from its plans, and keeps them in its
// plan journal.

const grantJournalKindName = "grant"

// grantHost is the broker as its grants see it (called with b.mu held).
type grantHost struct{ b *Broker }

func (h grantHost) Config() *config.Config        { return h.b.Config() }
func (h grantHost) Now() time.Time                { return h.b.Now() }
func (h grantHost) Policy() *policy.Policy        { return h.b.Policy.Current() }
func (h grantHost) Redact(s string) string        { return h.b.Redactor.Redact(s) }
func (h grantHost) Log() *slog.Logger             { return h.b.Log }
func (h grantHost) WorkspaceOf(dir string) string { return h.b.workspaceOf(dir) }

func (h grantHost) SessionOpen(id string) bool {
	s, ok := h.b.sessions[id]
	return ok && !s.Closed
}

// ProjectPolicy reports whether v is the version of a workspace's
// narrowed policy (a grant made under a project policy).
func (h grantHost) ProjectPolicy(v string) bool {
	return h.b.projects.Narrowed(v)
}

func (h grantHost) Journal(g *grants.Grant, sync bool) error {
	rec, err := grantRecord(g)
	if err != nil {
		return err
	}
	return h.b.journalAppend(rec, sync, &g.JournalBytes)
}

// workspaceOf is the workspace root that holds dir ("" when none does).
func (b *Broker) workspaceOf(dir string) string {
	return domain.WorkspaceOf(dir, b.Config().Workspaces)
}

// newGrantLocked builds (and checks) the grant an operator asks for while
// approving plan p; nil for an approval of this plan once. grants.Store
// makes it durable once the approval is.
func (b *Broker) newGrantLocked(caller *termdv1.Principal, p *planRec, spec *termdv1.GrantSpec) (*grants.Grant, error) {
	return b.grants.Make(caller, grants.Plan{ID: p.p.Id, SessionID: p.session.ID, Requester: p.p.Requester,
		Request: p.req, Decision: p.dec, Risk: wire.RiskProto(p.dec.Risk)}, spec)
}

// grantStillCovers re-checks, before a plan a grant approved runs, that the
// grant still covers its fresh decision (it may have been revoked).
func (b *Broker) grantStillCovers(p *planRec, fresh policy.Decision) string {
	b.mu.Lock()
	defer b.unlock()
	return b.grants.StillCovers(p.p.GrantId, p.p.Requester, p.session.ID, fresh)
}

// ListGrants lists grants; operators and viewers see all, agents their own.
func (b *Broker) ListGrants(_ context.Context, caller *termdv1.Principal, all bool, sessionID string) ([]*termdv1.Grant, error) {
	b.mu.Lock()
	defer b.unlock()
	return b.grants.List(caller, all, sessionID), nil
}

// RevokeGrant ends a grant at once (operators only).
func (b *Broker) RevokeGrant(_ context.Context, caller *termdv1.Principal, id string) (out *termdv1.Grant, err error) {
	b.mu.Lock()
	defer func() {
		if serr := b.unlockDurable(); serr != nil && err == nil {
			out, err = nil, errdefs.Internal("the revocation could not be recorded durably (%v); revoke it again", serr)
		}
	}()
	return b.grants.Revoke(caller, id)
}

func grantRecord(g *grants.Grant) (journalRecord, error) {
	data, match, err := g.Record()
	if err != nil {
		return journalRecord{}, err
	}
	return journalRecord{Kind: grantJournalKindName, Grant: data, GrantMatch: match}, nil
}

// restoreGrant replays a grant's journal record (the latest wins).
func (b *Broker) restoreGrant(rec journalRecord) error {
	return b.grants.Restore(rec.Grant, rec.GrantMatch)
}

// compactGrantsLocked writes the grants worth keeping into a compacted
// journal (emit); grants.Compact says which.
func (b *Broker) compactGrantsLocked(emit func(line []byte, slot *int64) error) error {
	return b.grants.Compact(func(g *grants.Grant) error {
		rec, err := grantRecord(g)
		if err != nil {
			return err
		}
		line, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return emit(append(line, '\n'), &g.JournalBytes)
	})
}
