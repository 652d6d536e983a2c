package broker

import (
	"context"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/termd/termd/daemon/broker/bounds"
	"github.com/termd/termd/daemon/broker/journal"
	"github.com/termd/termd/daemon/broker/plans"
	"github.com/termd/termd/daemon/broker/wire"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// planRec is a plan and what it was decided on. Guarded by Broker.mu.
type planRec struct {
	p       *termdv1.Plan
	req     policy.Request
	dec     policy.Decision
	session *session

	// enc keeps the part of the plan's journal record that never changes
	// between its records (journal.PlanEncoding.Record).
	enc journal.PlanEncoding

	// The plan bounds (planbounds.go): who requested it (principalKey) and
	// what that principal's plans hold, its request's size, whether it is
	// counted as open, whether it settled (and is among use.finished), and
	// whether it was forgotten.
	who           string
	use           *bounds.Use
	reqBytes      int64
	open, settled bool
	inFinished    bool
	forgotten     bool  // journal.fmu (also read by lazy journal writes)
	jbytes        int64 // size of its current journal record (journal.fmu)

	// stdin is the command's standard input (req.Stdin describes it),
	// held while the plan may still run and journalled with it (PlanEncoding.Record);
	// let go when it starts or settles (trackPlanLocked).
	stdin []byte

	// planned is how long CreatePlan took in the daemon (decision, record,
	// journal), reported as the plan stage of the execution that runs it
	// (stages.go); 0 for plans made otherwise (replans, grants).
	planned time.Duration
}

// The plan state machine is domain.PlanState's table (daemon/domain/state.go):
// every state change goes through it (plans.Move). Only restoring a plan at
// start may set a state directly, and only a final one the receipt store
// proves (plans.RestoreFinal).

// state is the plan's state (its record holds it as the API spells it).
func (p *planRec) state() domain.PlanState { return domain.PlanStateOf(p.p.GetState()) }

// stateWord is a plan state of the API as a word: "awaiting_approval".
func stateWord(s termdv1.PlanState) string { return domain.PlanStateOf(s).String() }

// transition moves a plan to a new state or explains why it cannot.
func (b *Broker) transition(p *planRec, to domain.PlanState) error {
	if err := plans.Move(p.p, to, b.Now()); err != nil {
		return err
	}
	b.trackPlanLocked(p)
	return nil
}

// The plan's texts and its restoring at start are daemon/broker/plans'.
func hintFor(p *termdv1.Plan) string  { return plans.Hint(p) }
func nextStep(p *termdv1.Plan) string { return plans.NextStep(p) }
func restoreFinal(p *termdv1.Plan, to termdv1.PlanState, receiptID string) {
	plans.RestoreFinal(p, to, receiptID)
}

// policyRequest turns the API request into the policy's canonical input (wire.Request).
func (b *Broker) policyRequest(caller *termdv1.Principal, r *termdv1.CommandRequest) (policy.Request, error) {
	cfg := b.Config()
	return wire.Request(r, wire.RequestContext{Caller: caller, DefaultMode: b.Policy.Current().DefaultMode(), Workspaces: cfg.Workspaces,
		MaxRequestBytes: cfg.Plans.MaxRequestBytes, MaxStdinBytes: cfg.Plans.MaxStdinBytes, Digest: b.Keys.Digest})
}

// heldBytes is what a plan of r holds: its request and its stdin.
func heldBytes(r *termdv1.CommandRequest) int64 { return wire.HeldBytes(r) }

// policyContext is what the daemon (not the caller) knows for a decision.
func (b *Broker) policyContext(caller *termdv1.Principal) policy.Context {
	ctx := policy.Context{Workspaces: b.Config().Workspaces, Protected: b.protectedPaths(), Sandbox: b.sandboxEnforced(), SandboxBy: b.sandboxEnforcer()}
	if caller != nil {
		if a, err := config.LookupUID(caller.Uid); err == nil {
			ctx.Home = a.User.HomeDir
		}
	}
	ctx.Credentials = b.credentialScopes(caller)
	ctx.EgressLists = b.net.EgressLists()
	return ctx
}

// decide runs the policy (narrowed by a project policy) for a caller's request.
func (b *Broker) decide(caller *termdv1.Principal, req policy.Request) policy.Decision {
	return b.projects.Decide(req, b.policyContext(caller)).Decision
}

// CheckPolicy decides a request and explains it, creating nothing.
func (b *Broker) CheckPolicy(_ context.Context, caller *termdv1.Principal, r *termdv1.CommandRequest) (*termdv1.Decision, string, error) {
	req, err := b.policyRequest(caller, r)
	if err != nil {
		return nil, "", err
	}
	ex := b.projects.Decide(req, b.policyContext(caller))
	d := ex.Decision
	wire.RedactDecision(b.Redactor, &d)
	out := wire.DecisionProto(d)
	out.Sandbox.Enforcement = string(b.SandboxLevel())
	return out, b.Redactor.Redact(string(ex.Request)), nil
}

// CreatePlan decides a request and records it as a plan. A denied request
// becomes a blocked plan with a decision receipt, so everyone sees why.
func (b *Broker) CreatePlan(_ context.Context, caller *termdv1.Principal, sessionID string, r *termdv1.CommandRequest) (*termdv1.Plan, error) {
	begun := time.Now()
	req, err := b.policyRequest(caller, r)
	if err != nil {
		return nil, err
	}
	if err := b.fs.PlanStorageAllows(caller); err != nil {
		return nil, err
	}
	dec := b.decide(caller, req)
	b.mu.Lock()
	defer b.unlock()
	s, err := b.planSessionLocked(caller, sessionID)
	if err != nil {
		return nil, err
	}
	if err := b.planRoomLocked(caller, s, heldBytes(r)); err != nil {
		return nil, err
	}
	p := b.newPlanLocked(caller, s, r, req, dec, "")
	out := proto.Clone(p.p).(*termdv1.Plan)
	p.planned = time.Since(begun)
	return out, nil
}

// planSessionLocked finds the session a new plan goes into: the given one,
// else the caller's most recent open session, else a new one.
func (b *Broker) planSessionLocked(caller *termdv1.Principal, id string) (*session, error) {
	if id != "" {
		return b.sessions.Plannable(caller, id)
	}
	if latest := b.sessions.ForPlan(caller, b.Config().Sessions.MaxPlans); latest != nil {
		return latest, nil
	}
	return b.newSessionLocked(caller, "")
}

func (b *Broker) newPlanLocked(caller *termdv1.Principal, s *session, r *termdv1.CommandRequest, req policy.Request, dec policy.Decision, from string) *planRec {
	now := b.Now()
	cover := b.grants.Cover(caller, s.ID, dec) // before redaction: grants match the real argv
	wire.RedactDecision(b.Redactor, &dec)
	p := plans.New(plans.Made{SessionID: s.ID, From: from, Requester: caller, Request: wire.RedactRequest(b.Redactor, r),
		Decision: wire.DecisionProto(dec), Preview: wire.PreviewOf(dec), Timeout: dec.Timeout, Limits: b.Policy.Current().Limits(),
		Enforcement: string(b.SandboxLevel())}, now)
	who := domain.PrincipalKey(caller)
	rec := &planRec{p: p, req: req, dec: dec, session: s, who: who, use: b.planUse.For(who), reqBytes: heldBytes(r)}
	if req.Stdin != nil && dec.Verdict != policy.Deny { // a blocked plan never runs
		rec.stdin = slices.Clone(r.Stdin)
	}
	if b.Metrics != nil {
		b.Metrics.PlanDecided(string(dec.Verdict))
	}
	initial := plans.Decided(p, dec.Verdict, cover != nil, now.Add(b.Config().Approvals.TTL.D()))
	if initial == domain.PlanApproved {
		b.grants.Approve(p, cover, now)
	}
	if err := plans.Move(p, initial, now); err != nil {
		panic(err) // UNSPECIFIED -> each verdict's state is in the table
	}
	b.plans[p.Id] = rec
	s.Plans = append(s.Plans, p.Id)
	b.trackPlanLocked(rec)
	s.Touch(now)
	// An allowed plan's record need not be durable now: executing it writes
	// the intent (fsync'd), which is its durable record from then on, and a
	// plan lost before that was never run and can be planned again. Plans
	// awaiting approval and blocked ones are durable before the answer.
	_ = b.journalPlan(rec, dec.Verdict != policy.Allow)
	b.publishPlan(rec, termdv1.EventKind_EVENT_KIND_PLAN_CREATED)
	switch rec.state() {
	case domain.PlanAwaitingApproval:
		b.publishPlan(rec, termdv1.EventKind_EVENT_KIND_AWAITING_APPROVAL)
	case domain.PlanApproved:
		b.publishPlan(rec, termdv1.EventKind_EVENT_KIND_APPROVED)
	case domain.PlanBlocked:
		b.decisionReceiptLocked(rec, "blocked", nil, "")
	}
	return rec
}

func (b *Broker) publishPlan(p *planRec, kind termdv1.EventKind) {
	snap := plans.Snapshot(p.p)
	b.Bus.Publish(p.session.ID, kind, func(e *termdv1.Event) { e.Payload = &termdv1.Event_Plan{Plan: snap} })
}

// planLocked finds a plan the caller may see; another agent's plan is not found.
func (b *Broker) planLocked(caller *termdv1.Principal, id string) (*planRec, error) {
	if id == "" {
		return nil, errdefs.Invalid("plan_id is empty; pass a plan id (see `termctl pending` or the plan's output)")
	}
	p, ok := b.plans[id]
	if !ok || !domain.Visible(caller, p.session.Owner) {
		return nil, errdefs.NotFound("plan %s not found (see `termctl pending`; plans of closed sessions and older finished plans are forgotten, their receipts stay: `termctl receipts list`)", id)
	}
	return p, nil
}

// GetPlan returns a plan the caller may see.
func (b *Broker) GetPlan(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Plan, error) {
	b.mu.Lock()
	defer b.unlock()
	p, err := b.planLocked(caller, id)
	if err != nil {
		return nil, err
	}
	return proto.Clone(p.p).(*termdv1.Plan), nil
}

// ListPlans lists plans the caller may see, newest first.
func (b *Broker) ListPlans(_ context.Context, caller *termdv1.Principal, r *termdv1.ListPlansRequest) ([]*termdv1.Plan, error) {
	b.mu.Lock()
	defer b.unlock()
	if r.SessionId != "" {
		if _, err := b.sessionLocked(caller, r.SessionId); err != nil {
			return nil, err
		}
	}
	var out []*termdv1.Plan
	for _, p := range b.plans {
		if plans.Listed(caller, r, p.p, p.session.ID, p.session.Owner) {
			out = append(out, p.p)
		}
	}
	return plans.Newest(out, r.Limit), nil
}

// decidableLocked finds a plan the caller may approve or deny.
func (b *Broker) decidableLocked(caller *termdv1.Principal, id string) (*planRec, error) {
	p, err := b.planLocked(caller, id)
	if err != nil {
		return nil, err
	}
	return p, plans.MayApprove(caller, p.p)
}

// ApprovePlan approves exactly the request the approver saw (by its hash).
func (b *Broker) ApprovePlan(ctx context.Context, caller *termdv1.Principal, id, requestHash string) (*termdv1.Plan, error) {
	p, _, err := b.ApprovePlanGrant(ctx, caller, id, requestHash, nil)
	return p, err
}

// ApprovePlanGrant approves a plan and, when spec asks for it, remembers the
// approval as a grant (grants.go).
func (b *Broker) ApprovePlanGrant(_ context.Context, caller *termdv1.Principal, id, requestHash string, spec *termdv1.GrantSpec) (out *termdv1.Plan, made *termdv1.Grant, err error) {
	b.mu.Lock()
	defer func() {
		if serr := b.unlockDurable(); serr != nil && err == nil {
			out, made, err = nil, nil, errdefs.Internal("the approval could not be recorded durably (%v); try again", serr)
		}
	}()
	p, err := b.decidableLocked(caller, id)
	if err != nil {
		return nil, nil, err
	}
	if err := plans.CheckApproval(p.p, requestHash); err != nil {
		return nil, nil, err
	}
	grant, err := b.newGrantLocked(caller, p, spec)
	if err != nil {
		return nil, nil, err
	}
	if err := b.transition(p, domain.PlanApproved); err != nil {
		return nil, nil, err
	}
	now := b.Now()
	plans.Approve(p.p, caller, requestHash, now, now.Add(b.Config().Approvals.TTL.D()))
	p.session.Touch(now)
	if err := b.journalPlanLocked(p); err != nil {
		return nil, nil, errdefs.Internal("the approval could not be recorded durably (%v); try again", err)
	}
	b.publishPlan(p, termdv1.EventKind_EVENT_KIND_APPROVED)
	b.Log.Info("plan approved", "plan", id, "approver", caller.Name, "request_hash", requestHash)
	if grant != nil {
		if made, err = b.grants.Store(grant); err != nil {
			return proto.Clone(p.p).(*termdv1.Plan), nil, err
		}
	}
	return proto.Clone(p.p).(*termdv1.Plan), made, nil
}

// DenyPlan refuses a plan awaiting approval; the denial gets a receipt.
func (b *Broker) DenyPlan(_ context.Context, caller *termdv1.Principal, id, reason string) (*termdv1.Plan, error) {
	b.mu.Lock()
	defer b.unlock()
	p, err := b.decidableLocked(caller, id)
	if err != nil {
		return nil, err
	}
	if reason, err = plans.DenialReason(reason); err != nil {
		return nil, err
	}
	if err := b.transition(p, domain.PlanDenied); err != nil {
		return nil, err
	}
	plans.Deny(p.p, caller, b.Redactor.Redact(reason), b.Now())
	_ = b.journalPlanLocked(p)
	b.publishPlan(p, termdv1.EventKind_EVENT_KIND_DENIED)
	b.decisionReceiptLocked(p, "denied", caller, "denied by "+caller.Name+": "+p.p.Denial.Reason)
	return proto.Clone(p.p).(*termdv1.Plan), nil
}

// Replan copies a plan's request into a new plan that is decided again.
func (b *Broker) Replan(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Plan, error) {
	b.mu.Lock()
	old, err := b.planLocked(caller, id)
	if err == nil && !domain.OwnerOrOperator(caller, old.session.Owner) {
		err = errdefs.Permission("plan %s belongs to %s; replan your own plans", id, old.session.Owner.Name)
	}
	if err != nil {
		b.unlock()
		return nil, err
	}
	req, s, r, held := old.req, old.session, old.p.Request, old.stdin
	b.unlock()
	if req, r, err = wire.Replan(caller, id, req, r, held, b.Policy.Current().DefaultMode()); err != nil {
		return nil, err
	}
	dec := b.decide(caller, req)
	b.mu.Lock()
	defer b.unlock()
	if s.Closed {
		var err error
		if s, err = b.planSessionLocked(caller, ""); err != nil {
			return nil, err
		}
	}
	if err := b.planRoomLocked(caller, s, heldBytes(r)); err != nil {
		return nil, err
	}
	p := b.newPlanLocked(caller, s, r, req, dec, id)
	return proto.Clone(p.p).(*termdv1.Plan), nil
}

// expirePlanLocked ends an approval window with a receipt.
func (b *Broker) expirePlanLocked(p *planRec) { b.expirePlanWhyLocked(p, "") }

// expirePlanWhyLocked expires an open plan before its time (why says why).
func (b *Broker) expirePlanWhyLocked(p *planRec, why string) {
	if err := b.transition(p, domain.PlanExpired); err != nil {
		return
	}
	b.publishPlan(p, termdv1.EventKind_EVENT_KIND_PLAN_EXPIRED)
	detail := "the plan was not run before it expired"
	if why != "" {
		detail = "the plan was not run before " + why
	}
	b.decisionReceiptLocked(p, "expired", nil, detail)
	_ = b.journalPlanLocked(p)
}

// FlagPlan raises a plan's scrutiny after the adviser flagged it: an
// allowed plan now needs approval. Scrutiny is never lowered.
func (b *Broker) FlagPlan(caller *termdv1.Principal, id, adviceDigest string, flagged bool) error {
	b.mu.Lock()
	defer b.unlock()
	p, err := b.planLocked(caller, id)
	if err != nil {
		return err
	}
	defer func() { _ = b.journalPlanLocked(p) }()
	raised, err := plans.Flag(p.p, adviceDigest, flagged, b.Now())
	if raised {
		b.trackPlanLocked(p)
		b.publishPlan(p, termdv1.EventKind_EVENT_KIND_AWAITING_APPROVAL)
	}
	return err
}
