package broker

import (
	"context"
	"testing"
	"time"

	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func (r *rig) approveGrant(t *testing.T, p *termdv1.Plan, spec *termdv1.GrantSpec) (*termdv1.Grant, error) {
	t.Helper()
	_, g, err := r.ApprovePlanGrant(context.Background(), operator, p.Id, p.Decision.RequestHash, spec)
	return g, err
}

// Scopes: an exact-request grant covers only that request; a session grant
// ends with its session; every grant ends at its expiry; bad specs are
// refused before anything is approved.
func TestGrantScopes(t *testing.T) {
	r := newRig(t)
	s := r.session(t, operator)

	p := r.plan(t, operator, s, "touch", "a.txt")
	for _, c := range []struct {
		spec  *termdv1.GrantSpec
		words string
	}{
		{&termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN, TtlSeconds: 31 * 24 * 3600}, "30 days"},
		{&termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST, Pattern: "touch <any>"}, "exact request"},
		{&termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_ONCE, Pattern: "touch <any>"}, "scope"},
		{&termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN, Pattern: "touch -c <any>"}, "words"},
	} {
		_, err := r.approveGrant(t, p, c.spec)
		wantErr(t, err, errdefs.KindInvalid, c.words)
		if st := r.state(t, p.Id); st != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
			t.Fatalf("a refused grant spec approved the plan anyway: %v", st)
		}
	}

	g, err := r.approveGrant(t, p, &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_SESSION_REQUEST})
	if err != nil || g == nil || g.RequestHash != p.Decision.RequestHash {
		t.Fatalf("exact-request grant: %v %v", g, err)
	}
	if again := r.plan(t, operator, s, "touch", "a.txt"); again.GrantId != g.Id || again.State != termdv1.PlanState_PLAN_STATE_APPROVED {
		t.Fatalf("the same request again: %v %q", again.State, again.GrantId)
	}
	if other := r.plan(t, operator, s, "touch", "b.txt"); other.GrantId != "" {
		t.Fatal("an exact-request grant covered another request")
	}
	if elsewhere := r.plan(t, operator, r.session(t, operator), "touch", "a.txt"); elsewhere.GrantId != "" {
		t.Fatal("a session grant covered a plan in another session")
	}

	ws, err := r.approveGrant(t, r.plan(t, operator, s, "mkdir", "d1"), &termdv1.GrantSpec{Scope: termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN, Pattern: "mkdir <any>", TtlSeconds: 3600})
	if err != nil || ws.Workspace != r.ws || ws.SessionId != "" {
		t.Fatalf("workspace grant: %v %v", ws, err)
	}
	if p := r.plan(t, operator, r.session(t, operator), "mkdir", "d2"); p.GrantId != ws.Id {
		t.Fatalf("a workspace grant must cover other sessions of its principal: %q", p.GrantId)
	}

	// The session ends: its grants end; the workspace grant stays until it expires.
	if _, err := r.CloseSession(context.Background(), operator, s); err != nil {
		t.Fatal(err)
	}
	gs, _ := r.ListGrants(context.Background(), operator, true, "")
	status := map[string]string{}
	for _, x := range gs {
		status[x.Id] = x.Status
	}
	if status[g.Id] != "expired" || status[ws.Id] != "active" {
		t.Fatalf("after closing the session: %v", status)
	}
	r.clock.Advance(2 * time.Hour)
	if p := r.plan(t, operator, r.session(t, operator), "mkdir", "d3"); p.GrantId != "" {
		t.Fatal("an expired workspace grant still covers")
	}
	if gs, _ := r.ListGrants(context.Background(), operator, false, ""); len(gs) != 0 {
		t.Fatalf("ended grants listed without --all: %v", gs)
	}
	if _, err := r.RevokeGrant(context.Background(), agent, ws.Id); errdefs.KindOf(err) != errdefs.KindPermission {
		t.Fatalf("an agent revoking a grant: %v", err)
	}
}
