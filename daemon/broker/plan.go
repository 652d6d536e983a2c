package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/broker/bounds"
	"github.com/termd/termd/daemon/broker/journal"
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
// every state change goes through it here (moveState). Only restoring a
// plan at start may set a state directly, and only a final one the receipt
// store proves (restoreFinal).

// state is the plan's state (its record holds it as the API spells it).
func (p *planRec) state() domain.PlanState { return domain.PlanStateOf(p.p.GetState()) }

// stateWord is a plan state of the API as a word: "awaiting_approval".
func stateWord(s termdv1.PlanState) string { return domain.PlanStateOf(s).String() }

// transition moves a plan to a new state or explains why it cannot.
func (b *Broker) transition(p *planRec, to domain.PlanState) error {
	if err := moveState(p.p, to, b.Now()); err != nil {
		return err
	}
	b.trackPlanLocked(p)
	return nil
}

// moveState is the one place a plan's state changes (domain.PlanState.CanBecome).
func moveState(p *termdv1.Plan, to domain.PlanState, now time.Time) error {
	from := domain.PlanStateOf(p.State)
	if !from.CanBecome(to) {
		return errdefs.Precondition("plan %s is in state %s; it cannot become %s%s", p.Id, from, to, hintFor(p))
	}
	p.State = to.Proto()
	p.UpdatedAt = timestamppb.New(now)
	p.NextStep = nextStep(p)
	return nil
}

// restoreFinal settles a plan restored from the journal at start in the
// final state the receipt store proves (the journal writes start and finish
// lazily, so it may still say approved or running). It is not a transition:
// the move happened before the restart; only final states are accepted.
func restoreFinal(p *termdv1.Plan, to termdv1.PlanState, receiptID string) {
	if !domain.PlanStateOf(to).IsFinal() {
		panic("broker: restoring plan " + p.Id + " to a non-final state " + stateWord(to))
	}
	p.State, p.ReceiptId = to, receiptID
	p.NextStep = nextStep(p)
}

func hintFor(p *termdv1.Plan) string {
	st := domain.PlanStateOf(p.State)
	switch st {
	case domain.PlanAwaitingApproval:
		return fmt.Sprintf(" (it is awaiting approval: an operator runs `termctl approve %s`)", p.Id)
	case domain.PlanApproved, domain.PlanPlanned:
		return fmt.Sprintf(" (it may run now: `termctl execute %s --follow`)", p.Id)
	case domain.PlanBlocked:
		return " (the policy denied it: " + strings.Join(p.Decision.GetReasons(), "; ") + ")"
	case domain.PlanExpired, domain.PlanDenied:
		return fmt.Sprintf(" (run `termctl replan %s` to decide it again)", p.Id)
	case domain.PlanRunning, domain.PlanPaused:
		return " (a plan runs at most once; it is running now)"
	}
	if st.IsFinal() {
		return fmt.Sprintf(" (a plan runs at most once; run `termctl replan %s` to run it again)", p.Id)
	}
	return ""
}

func nextStep(p *termdv1.Plan) string {
	st := domain.PlanStateOf(p.State)
	switch st {
	case domain.PlanPlanned:
		return fmt.Sprintf("allowed: run it now (`termctl execute %s --follow`)", p.Id)
	case domain.PlanAwaitingApproval:
		return fmt.Sprintf("needs approval: an operator runs `termctl approve %s` (or approves it in the console); then execute it", p.Id)
	case domain.PlanApproved:
		if p.GrantId != "" {
			return fmt.Sprintf("approved by grant %s (an operator's remembered approval): run it with `termctl execute %s --follow` before the approval expires", p.GrantId, p.Id)
		}
		return fmt.Sprintf("approved: run it with `termctl execute %s --follow` before the approval expires", p.Id)
	case domain.PlanBlocked:
		return "denied by policy: change the command (see the reasons); it cannot be approved"
	case domain.PlanDenied:
		return "denied by " + p.Denial.GetDeniedBy().GetName() + ": " + p.Denial.GetReason()
	case domain.PlanExpired:
		return fmt.Sprintf("expired: run `termctl replan %s` to decide it again", p.Id)
	case domain.PlanRunning, domain.PlanPaused:
		if p.GetDecision().GetTty() != nil {
			return fmt.Sprintf("running on a terminal as execution %s: attach to it with `termctl attach %s` (or type into it in the console), read its screen with `termctl screen %s`, or pause/cancel it", p.ExecutionId, p.ExecutionId, p.ExecutionId)
		}
		return fmt.Sprintf("running as execution %s: follow it with `termctl output %s` or pause/cancel it", p.ExecutionId, p.ExecutionId)
	}
	if st.IsFinal() {
		return fmt.Sprintf("finished: its receipt is %s (`termctl receipts show %s`)", p.ReceiptId, p.ReceiptId)
	}
	return ""
}

// policyRequest turns the API request into the policy's canonical input.
func (b *Broker) policyRequest(caller *termdv1.Principal, r *termdv1.CommandRequest) (policy.Request, error) {
	if r == nil {
		return policy.Request{}, errdefs.Invalid("request is empty; send argv (a list) or command (a string)")
	}
	if len(r.Argv) > 0 && r.Command != "" {
		return policy.Request{}, errdefs.Invalid("send either argv or command, not both")
	}
	if len(r.Argv) == 0 && strings.TrimSpace(r.Command) == "" {
		return policy.Request{}, errdefs.Invalid("nothing to run: send argv (a list, e.g. [\"ls\", \"-la\"]) or command (a string)")
	}
	if n, max := requestBytes(r), b.Config().Plans.MaxRequestBytes; n > max {
		// Refused before anything is decided or journalled: a plan, its
		// receipt and the journal each keep copies of the request.
		return policy.Request{}, errdefs.Invalid("the request is %s; termd accepts at most %s of argv, command, cwd and env together (plans.max_request_bytes, %d): put long input in a file in the workspace and pass its name", domain.BytesWord(int64(n)), domain.BytesWord(int64(max)), max)
	}
	stdin, err := b.stdinOf(r)
	if err != nil {
		return policy.Request{}, err
	}
	pol := b.Policy.Current()
	mode := pol.DefaultMode()
	if r.Mode != termdv1.Mode_MODE_UNSPECIFIED {
		m, err := wire.ModeFromProto(r.Mode)
		if err != nil {
			return policy.Request{}, err
		}
		// Only operators may ask for a mode less strict than the policy's default.
		if m.MorePermissiveThan(mode) && !domain.IsOperator(caller) {
			return policy.Request{}, errdefs.Permission("mode %s is less strict than the policy's default (%s); only operators may request it", m, mode)
		}
		mode = m
	}
	cwd := r.Cwd
	if cwd == "" {
		cwd = b.Config().Workspaces[0]
	} else if !filepath.IsAbs(cwd) {
		// Agents think in project paths ("src"): relative to the first
		// workspace root. The policy still checks where it resolves to.
		cwd = filepath.Join(b.Config().Workspaces[0], cwd)
	}
	return policy.Request{
		Argv:    slices.Clone(r.Argv),
		Command: r.Command,
		Cwd:     cwd,
		Env:     r.Env,
		Mode:    mode,
		Timeout: time.Duration(r.TimeoutSeconds) * time.Second,
		Sandbox: r.Sandbox,
		TTY:     terminalRequest(r.Tty),
		// Names only: values are read when an execution starts.
		Credentials: slices.Clone(r.Credentials),
		Privileged:  r.Privileged,
		Stdin:       stdin,
		Network:     r.Network,
	}, nil
}

// stdinOf checks a request's stdin against plans.max_stdin_bytes and
// describes it for the canonical request: its size and keyed SHA-256 (as
// command_sha256, so a short secret piped in cannot be recovered from a
// receipt by hashing guesses). nil: none (/dev/null).
func (b *Broker) stdinOf(r *termdv1.CommandRequest) (*policy.Stdin, error) {
	if len(r.Stdin) == 0 {
		return nil, nil
	}
	if max := b.Config().Plans.MaxStdinBytes; len(r.Stdin) > max {
		if max == 0 {
			return nil, errdefs.Invalid("stdin is refused here (plans.max_stdin_bytes is 0): put the input in a file in the workspace and pass its name")
		}
		return nil, errdefs.Invalid("stdin is %s; termd accepts at most %s of stdin per plan (plans.max_stdin_bytes, %d): put larger input in a file in the workspace and pass its name", domain.BytesWord(int64(len(r.Stdin))), domain.BytesWord(int64(max)), max)
	}
	if r.Tty != nil {
		return nil, errdefs.Invalid("stdin cannot be given to a terminal (tty) plan: its input is what is typed into it (`termctl send`, `termctl attach`); drop the tty or the stdin")
	}
	return &policy.Stdin{Bytes: int64(len(r.Stdin)), SHA256: b.Keys.Digest(r.Stdin)}, nil
}

// heldBytes is what a plan of r holds: its request and its stdin.
func heldBytes(r *termdv1.CommandRequest) int64 { return int64(requestBytes(r) + len(r.Stdin)) }

// requestBytes is the size of a request's argv, command, cwd, env and
// credential names (plans.max_request_bytes); not its stdin.
func requestBytes(r *termdv1.CommandRequest) int {
	n := len(r.Command) + len(r.Cwd)
	for _, a := range r.Argv {
		n += len(a)
	}
	for k, v := range r.Env {
		n += len(k) + len(v)
	}
	for _, c := range r.Credentials {
		n += len(c)
	}
	return n
}

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
		s, err := b.sessionLocked(caller, id)
		if err != nil {
			return nil, err
		}
		if s.closed {
			return nil, errdefs.Precondition("session %s is closed; plan in an open session (omit session_id to use your latest)", id)
		}
		if !domain.OwnerOrOperator(caller, s.owner) {
			return nil, errdefs.Permission("session %s belongs to %s; plan in your own session", id, s.owner.Name)
		}
		return s, nil
	}
	var latest *session
	key := domain.PrincipalKey(caller)
	for _, s := range b.sessions {
		if !s.closed && domain.PrincipalKey(s.owner) == key && s.open < b.Config().Sessions.MaxPlans && (latest == nil || s.lastActive.After(latest.lastActive)) {
			latest = s
		}
	}
	if latest != nil {
		return latest, nil
	}
	return b.newSessionLocked(caller, "")
}

func (b *Broker) newPlanLocked(caller *termdv1.Principal, s *session, r *termdv1.CommandRequest, req policy.Request, dec policy.Decision, from string) *planRec {
	now := b.Now()
	cover := b.coverLocked(caller, s, dec) // before redaction: grants match the real argv
	wire.RedactDecision(b.Redactor, &dec)
	pol := b.Policy.Current()
	lim := pol.Limits()
	p := &termdv1.Plan{
		Id:            uuid.NewString(),
		SessionId:     s.id,
		Request:       wire.RedactRequest(b.Redactor, r),
		Decision:      wire.DecisionProto(dec),
		Preview:       wire.PreviewOf(dec),
		Requester:     proto.Clone(caller).(*termdv1.Principal),
		CreatedAt:     timestamppb.New(now),
		UpdatedAt:     timestamppb.New(now),
		ReplannedFrom: from,
		Limits: &termdv1.Limits{
			TimeoutSeconds: uint32(dec.Timeout / time.Second),
			OutputBytes:    lim.OutputBytes,
			MemoryBytes:    lim.MemoryBytes,
			Pids:           lim.Pids,
			GraceSeconds:   uint32(lim.Grace / time.Second),
		},
	}
	p.Decision.Sandbox.Enforcement = string(b.SandboxLevel())
	p.Preview.Sandbox.Enforcement = p.Decision.Sandbox.Enforcement
	who := domain.PrincipalKey(caller)
	rec := &planRec{p: p, req: req, dec: dec, session: s, who: who, use: b.planUse.For(who), reqBytes: heldBytes(r)}
	if req.Stdin != nil && dec.Verdict != policy.Deny { // a blocked plan never runs
		rec.stdin = slices.Clone(r.Stdin)
	}
	if b.Metrics != nil {
		b.Metrics.PlanDecided(string(dec.Verdict))
	}
	ttl := b.Config().Approvals.TTL.D()
	initial := domain.PlanBlocked
	switch dec.Verdict {
	case policy.Allow:
		initial = domain.PlanPlanned
		p.ExpiresAt = timestamppb.New(now.Add(ttl))
	case policy.Ask:
		initial = domain.PlanAwaitingApproval
		p.ExpiresAt = timestamppb.New(now.Add(ttl))
		if cover != nil {
			initial = domain.PlanApproved
			b.approveByGrantLocked(p, cover, now)
		}
	}
	if err := moveState(p, initial, now); err != nil {
		panic(err) // UNSPECIFIED -> each verdict's state is in the table
	}
	b.plans[p.Id] = rec
	s.plans = append(s.plans, p.Id)
	b.trackPlanLocked(rec)
	s.touch(now)
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
	snap := proto.Clone(p.p).(*termdv1.Plan)
	b.Bus.Publish(p.session.id, kind, func(e *termdv1.Event) { e.Payload = &termdv1.Event_Plan{Plan: snap} })
}

// planLocked finds a plan the caller may see; another agent's plan is not found.
func (b *Broker) planLocked(caller *termdv1.Principal, id string) (*planRec, error) {
	if id == "" {
		return nil, errdefs.Invalid("plan_id is empty; pass a plan id (see `termctl pending` or the plan's output)")
	}
	p, ok := b.plans[id]
	if !ok || !domain.Visible(caller, p.session.owner) {
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
		if !domain.Visible(caller, p.session.owner) || (r.SessionId != "" && p.session.id != r.SessionId) {
			continue
		}
		if len(r.States) > 0 && !slices.Contains(r.States, p.p.State) {
			continue
		}
		if r.ApprovableOnly && (p.state() != domain.PlanAwaitingApproval || mayApprove(caller, p) != nil) {
			continue
		}
		out = append(out, p.p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.AsTime().After(out[j].CreatedAt.AsTime()) })
	if r.Limit > 0 && len(out) > int(r.Limit) {
		out = out[:r.Limit]
	}
	for i := range out {
		out[i] = proto.Clone(out[i]).(*termdv1.Plan)
	}
	return out, nil
}

// mayApprove says whether caller may approve or deny p.
func mayApprove(caller *termdv1.Principal, p *planRec) error {
	if !domain.IsOperator(caller) {
		return errdefs.Permission("only operators approve plans; ask an operator to run `termctl approve %s`", p.p.Id)
	}
	req := p.p.Requester
	if req.GetRole() == termdv1.Role_ROLE_AGENT && domain.PrincipalKey(req) == domain.PrincipalKey(caller) {
		return errdefs.Permission("plan %s was requested by you as an agent; an agent cannot approve its own plan", p.p.Id)
	}
	return nil
}

// decidableLocked finds a plan the caller may approve or deny.
func (b *Broker) decidableLocked(caller *termdv1.Principal, id string) (*planRec, error) {
	p, err := b.planLocked(caller, id)
	if err != nil {
		return nil, err
	}
	return p, mayApprove(caller, p)
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
	if p.state() != domain.PlanAwaitingApproval {
		return nil, nil, errdefs.Precondition("plan %s is %s, not awaiting approval%s", id, stateWord(p.p.State), hintFor(p.p))
	}
	if requestHash == "" {
		return nil, nil, errdefs.Invalid("request_hash is empty: approve the exact request you reviewed by passing its hash (%s)", p.p.Decision.RequestHash)
	}
	if requestHash != p.p.Decision.RequestHash {
		return nil, nil, errdefs.Precondition("request_hash %s does not match plan %s (%s): review the plan again before approving", requestHash, id, p.p.Decision.RequestHash)
	}
	grant, err := b.newGrantLocked(caller, p, spec)
	if err != nil {
		return nil, nil, err
	}
	if err := b.transition(p, domain.PlanApproved); err != nil {
		return nil, nil, err
	}
	now := b.Now()
	exp := now.Add(b.Config().Approvals.TTL.D())
	p.p.Approval = &termdv1.Approval{Approver: proto.Clone(caller).(*termdv1.Principal), ApprovedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(exp), RequestHash: requestHash}
	p.p.ExpiresAt = timestamppb.New(exp)
	p.p.NextStep = nextStep(p.p)
	p.session.touch(now)
	if err := b.journalPlanLocked(p); err != nil {
		return nil, nil, errdefs.Internal("the approval could not be recorded durably (%v); try again", err)
	}
	b.publishPlan(p, termdv1.EventKind_EVENT_KIND_APPROVED)
	b.Log.Info("plan approved", "plan", id, "approver", caller.Name, "request_hash", requestHash)
	if grant != nil {
		if made, err = b.storeGrantLocked(grant); err != nil {
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
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, errdefs.Invalid("a denial needs a reason (e.g. --reason \"writes outside the task\")")
	}
	if err := b.transition(p, domain.PlanDenied); err != nil {
		return nil, err
	}
	p.p.Denial = &termdv1.Denial{DeniedBy: proto.Clone(caller).(*termdv1.Principal), DeniedAt: timestamppb.New(b.Now()), Reason: b.Redactor.Redact(reason)}
	p.p.ExpiresAt = nil
	p.p.NextStep = nextStep(p.p)
	_ = b.journalPlanLocked(p)
	b.publishPlan(p, termdv1.EventKind_EVENT_KIND_DENIED)
	b.decisionReceiptLocked(p, "denied", caller, "denied by "+caller.Name+": "+p.p.Denial.Reason)
	return proto.Clone(p.p).(*termdv1.Plan), nil
}

// Replan copies a plan's request into a new plan that is decided again.
func (b *Broker) Replan(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Plan, error) {
	b.mu.Lock()
	old, err := b.planLocked(caller, id)
	if err == nil && !domain.OwnerOrOperator(caller, old.session.owner) {
		err = errdefs.Permission("plan %s belongs to %s; replan your own plans", id, old.session.owner.Name)
	}
	if err != nil {
		b.unlock()
		return nil, err
	}
	req, s, r := old.req, old.session, old.p.Request
	if req.Stdin != nil {
		if old.stdin == nil {
			b.unlock()
			return nil, errdefs.Precondition("plan %s read %s of stdin, which termd holds only until a plan runs, expires or is denied: plan the command again with its input", id, domain.BytesWord(req.Stdin.Bytes))
		}
		r = proto.Clone(r).(*termdv1.CommandRequest)
		r.Stdin = old.stdin
	}
	b.unlock()
	// The new plan is the caller's: it gets no mode the caller could not ask
	// for (an agent replanning an operator's trusted plan is decided in the
	// policy's default mode).
	if def := b.Policy.Current().DefaultMode(); req.Mode.MorePermissiveThan(def) && !domain.IsOperator(caller) {
		req.Mode = def
		r = proto.Clone(r).(*termdv1.CommandRequest)
		r.Mode = wire.ModeProto(def)
	}
	dec := b.decide(caller, req)
	b.mu.Lock()
	defer b.unlock()
	if s.closed {
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
	p.p.NextStep = nextStep(p.p)
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
	p.p.AdviceDigest = adviceDigest
	defer func() { _ = b.journalPlanLocked(p) }()
	if !flagged {
		return nil
	}
	p.p.FlaggedByAdviser = true
	if p.state() == domain.PlanPlanned {
		if err := b.transition(p, domain.PlanAwaitingApproval); err != nil {
			return err
		}
		p.p.Decision.Reasons = append(p.p.Decision.Reasons, "the adviser flagged this plan as dangerous; it needs approval")
		b.publishPlan(p, termdv1.EventKind_EVENT_KIND_AWAITING_APPROVAL)
	}
	return nil
}
