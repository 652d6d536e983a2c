package broker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/broker/receiptq"
	"github.com/termd/termd/daemon/broker/sessions"
	"github.com/termd/termd/daemon/broker/stages"
	"github.com/termd/termd/daemon/broker/terminals"
	"github.com/termd/termd/daemon/broker/wire"
	"github.com/termd/termd/daemon/broker/wsnet"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/netns"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/internal/pathmemo"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// execRec is one execution. Guarded by Broker.mu unless noted.
type execRec struct {
	id       string
	who      string // principalKey of the requester (Broker.runningBy)
	e        *termdv1.Execution
	plan     *planRec
	proc     *runner.Process
	finished bool
	done     chan struct{}
	// ends are the events finish published last for it (FINISHED, then
	// RECEIPT_SIGNED when the receipt was stored), set under b.mu just
	// before done is closed: a foreground client that lagged past them is
	// sent them again (ExecuteAndWait).
	ends []*termdv1.Event

	// stopReason explains a cancel that did not come from a caller's Cancel
	// (session closed or expired, daemon shutting down).
	stopReason        string
	closeSessionAfter bool
	// storageTail says why only a tail of the output is stored (over a
	// storage budget with storage.over_budget: tail); "" = the usual cap.
	storageTail string
	cancelledBy *termdv1.Principal

	// Setup is what it was given to start with (daemon/broker/executions):
	// its redactor, credentials, git identity, time limit, stdin, live
	// output, launcher, sandbox record and private TMPDIR. Set before the
	// spawn and never changed after.
	executions.Setup
	// hub is a PTY execution's terminal (daemon/broker/terminals); nil otherwise. Set
	// before the spawn and never changed.
	hub *terminals.Hub

	// netMode is the plan's network (netmode.Mode), for the receipt; set
	// before the spawn. netns is its hold on its workspace loopback (nil:
	// none; released with the sandbox), netKey that loopback's key (kept
	// after the release: port forwards find the loopback by it), and
	// netFallback why it ran with no network instead ("" when it did not).
	netMode     string
	netns       *netns.Handle
	netKey      netns.Key
	netFallback string
	// egress is the allow-list proxy of a network egress:NAME execution
	// (daemon/broker/wsnet); nil otherwise.
	egress *wsnet.Egress

	// begun is when Execute was called; stage holds the stage durations
	// known so far (daemon/broker/stages), completed by finish.
	begun   time.Time
	spawned time.Time
	stage   stages.Times
}

// Execute starts an allowed or approved plan and returns at once.
func (b *Broker) Execute(_ context.Context, caller *termdv1.Principal, planID, sessionID string) (*termdv1.Execution, error) {
	e, err := b.start(caller, planID, sessionID)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.unlock()
	return proto.Clone(e.e).(*termdv1.Execution), nil
}

// ExecuteAndWait starts a plan and delivers its events until its receipt is
// signed, in order and in batches (sessions.Follow: a short command's
// events all in one). The caller owns a foreground execution: when its stream ends first
// (the client was killed, its pipe broke, its terminal closed), the execution
// is cancelled and gets a receipt saying why. A detached one keeps running.
func (b *Broker) ExecuteAndWait(ctx context.Context, caller *termdv1.Principal, planID, sessionID string, detach bool, send func([]*termdv1.Event) error) error {
	return b.ExecuteAndFollow(ctx, caller, planID, sessionID, FollowOptions{Detach: detach}, send)
}

// FollowOptions are how ExecuteAndFollow follows: Detach as ExecuteAndWait's
// detach; Live sends each event as it is published, never held for those
// after it (a client relaying progress as it happens).
type FollowOptions struct{ Detach, Live bool }

// ExecuteAndFollow is ExecuteAndWait with its options.
func (b *Broker) ExecuteAndFollow(ctx context.Context, caller *termdv1.Principal, planID, sessionID string, o FollowOptions, send func([]*termdv1.Event) error) (err error) {
	detach := o.Detach
	release, err := b.acquireStream(caller)
	if err != nil {
		return err
	}
	defer release()
	b.mu.Lock()
	p, err := b.planLocked(caller, planID)
	var since uint64
	if err == nil {
		since = b.Bus.LastSeq(p.session.ID)
	}
	b.unlock()
	if err != nil {
		return err
	}
	sub, err := b.Bus.Subscribe(p.session.ID, since)
	if err != nil {
		return errdefs.Internal("subscribing to session events: %v", err)
	}
	defer sub.Close()
	e, err := b.start(caller, planID, sessionID)
	if err != nil {
		return err
	}
	if !detach && e.hub == nil { // a PTY execution outlives its clients (ARCHITECTURE §2.11)
		defer func() {
			if err != nil {
				b.abandon(e, "the client running it in the foreground went away before it finished ("+err.Error()+"); run it detached (`termctl run --detach`) to keep it running")
			}
		}()
	}
	linger := b.linger
	if e.hub != nil || o.Live {
		linger = 0 // its client follows it until it starts (the MCP bridge, the console)
	}
	return sessions.Follow(ctx, sub, e.id, planID, linger, func() []*termdv1.Event {
		b.mu.Lock()
		defer b.unlock()
		return e.ends
	}, send)
}

// start checks everything, records the intent durably, and spawns.
func (b *Broker) start(caller *termdv1.Principal, planID, sessionID string) (*execRec, error) {
	begun := time.Now()
	tail, err := b.fs.StorageAllows(caller)
	if err != nil {
		return nil, err
	}
	r, err := b.reserve(caller, planID, sessionID, begun, tail)
	if err != nil {
		return nil, err
	}
	fresh, err := b.recheck(r)
	if err != nil {
		return nil, err
	}
	spec, err := b.spec(r.e, fresh, r.requester, r.paths)
	if err != nil {
		b.refuse(r.e, err.Error())
		return nil, err
	}
	return b.launch(r, fresh, spec)
}

// reservation is a plan reserved for its start (it is running: it cannot
// start twice) and what the start re-checks, read under the mutex.
type reservation struct {
	e         *execRec
	now       time.Time
	req       policy.Request
	approved  policy.Decision
	requester *termdv1.Principal
	// paths is the execution's memo of the file system's answers: the
	// re-check's, which its sandbox's hidden paths share. It goes with the
	// reservation: the next execution looks again.
	paths pathmemo.Memo
}

// startableLocked finds a plan that caller may start now in the session
// named (any, when sessionID is empty).
func (b *Broker) startableLocked(caller *termdv1.Principal, planID, sessionID string) (*planRec, error) {
	if b.closing {
		return nil, errdefs.Unavailable("termd is shutting down; nothing new starts")
	}
	p, err := b.planLocked(caller, planID)
	if err != nil {
		return nil, err
	}
	s := p.session
	if sessionID != "" && sessionID != s.ID {
		return nil, errdefs.Precondition("plan %s belongs to session %s, not %s; a plan runs only in its own session", planID, s.ID, sessionID)
	}
	if !domain.OwnerOrOperator(caller, s.Owner) {
		return nil, errdefs.Permission("plan %s belongs to %s; only its owner or an operator may execute it", planID, s.Owner.Name)
	}
	// A command runs as its requester: only the requester (or an operator)
	// may start it, or an agent could run an operator's plan with the
	// operator's uid (an operator may plan or replan in an agent's session).
	if !domain.IsOperator(caller) && domain.PrincipalKey(caller) != domain.PrincipalKey(p.p.Requester) {
		return nil, errdefs.Permission("plan %s was requested by %s and runs as that principal; only its requester or an operator may execute it", planID, p.p.Requester.GetName())
	}
	if s.Closed {
		return nil, errdefs.Precondition("session %s is closed; replan in an open session (`termctl replan %s`)", s.ID, planID)
	}
	switch p.state() {
	case domain.PlanPlanned, domain.PlanApproved:
	default:
		// read under the lock: the plan may be finishing
		return nil, errdefs.Precondition("plan %s is in state %s and cannot be executed%s", planID, stateWord(p.p.State), hintFor(p.p))
	}
	if n, max := b.runningBy[domain.PrincipalKey(p.p.Requester)], b.Config().Sessions.MaxRunning; n >= max {
		return nil, errdefs.Exhausted("%s already has %d commands running (the per-principal cap, sessions.max_running); wait for one to finish, or cancel one (`termctl sessions list` shows them)", p.p.Requester.GetName(), n)
	}
	return p, nil
}

// reserve checks that caller may start the plan and reserves it: the plan
// is running and its execution counted, so it cannot start twice while the
// start re-checks outside the lock.
func (b *Broker) reserve(caller *termdv1.Principal, planID, sessionID string, begun time.Time, tail string) (*reservation, error) {
	b.mu.Lock()
	p, err := b.startableLocked(caller, planID, sessionID)
	if err != nil {
		b.unlock()
		return nil, err
	}
	s := p.session
	stdin := p.stdin // let go of by the transition: the execution holds it now
	if err := b.transition(p, domain.PlanRunning); err != nil {
		b.unlock()
		return nil, err
	}
	now := b.Now()
	e := &execRec{
		id:          uuid.NewString(),
		plan:        p,
		done:        make(chan struct{}),
		begun:       begun,
		storageTail: tail,
		Setup:       executions.Setup{Redactor: b.Redactor, Stdin: stdin},
		e: &termdv1.Execution{
			PlanId:    p.p.Id,
			SessionId: s.ID,
			State:     termdv1.ExecutionState_EXECUTION_STATE_RUNNING,
			StartedAt: timestamppb.New(now),
		},
	}
	e.e.Id = e.id
	e.stage[stages.Plan] = p.planned
	s.AddRunning(e)
	s.Touch(now)
	p.p.ExecutionId = e.id
	p.p.NextStep = nextStep(p.p)
	// The intent is the durable record of the start; the journal's record
	// of it is encoded and written just after the mutex is released, before
	// the intent, and before anything else can change this plan (its next
	// change comes from this goroutine or after the spawn).
	record := b.journalPlanAfter(p)
	b.execs[e.id] = e
	e.who = domain.PrincipalKey(p.p.Requester)
	b.runningBy[e.who]++
	b.running.Add(1)
	r := &reservation{e: e, now: now, req: p.req, approved: p.dec, requester: p.p.Requester, paths: pathmemo.Memo{}}
	b.unlock()
	record()
	return r, nil
}

// recheck decides the plan again and refuses it when what it was decided
// and approved on changed since; it returns the fresh decision.
func (b *Broker) recheck(r *reservation) (policy.Decision, error) {
	p := r.e.plan
	ctx := b.policyContext(r.requester)
	ctx.Paths = r.paths
	fresh := b.projects.Decide(r.req, ctx).Decision
	// The plan holds its decision as shown (redacted): compare the fresh one
	// in that form. The request hash, computed on the real request, still
	// binds exactly what runs.
	shown := fresh
	wire.RedactDecision(b.Redactor, &shown)
	msg := executions.Stale(r.approved, shown)
	if msg == "" && p.p.GrantId != "" {
		if why := b.grantStillCovers(p, fresh); why != "" {
			msg = "the grant that approved it no longer covers it: " + why
		}
	}
	if msg != "" {
		b.refuse(r.e, "plan is stale; replan: "+msg)
		return fresh, errdefs.Precondition("plan is stale; replan (`termctl replan %s`): %s", p.p.Id, msg)
	}
	return fresh, nil
}

// launch records the intent and spawns the command; a spawn that failed is
// a finished execution with its receipt.
func (b *Broker) launch(r *reservation, fresh policy.Decision, spec runner.Spec) (*execRec, error) {
	e, p := r.e, r.e.plan
	draft := b.draftReceipt(p, r.now)
	draft.Credentials = e.Credentials
	draft.Sandbox = executions.ReceiptSandbox(e.Sandbox, !fresh.Sandbox.Network && b.Runner.Capabilities().NetNS)
	e.ReceiptHostIdentity(draft)
	// The cgroup path is known before the spawn, so a crash at any moment
	// leaves enough to find and kill what the command started.
	cgroupPath := ""
	if b.Runner.Capabilities().CgroupV2 != "" {
		cgroupPath = b.Runner.Reserve(spec)
	}
	intent := receiptstore.Intent{ExecutionID: e.id, PlanID: p.p.Id, SessionID: p.session.ID, StartedAt: r.now, CgroupPath: cgroupPath, Receipt: draft}
	proc, err, ierr := b.spawn(e, spec, intent)
	if ierr != nil {
		if proc != nil {
			proc.Wait() // nothing ran: the runner refused to release it
		}
		b.refuse(e, "could not record the execution intent: "+ierr.Error())
		return nil, errdefs.Internal("recording the execution intent durably failed (%v); nothing was started", ierr)
	}
	if err != nil {
		// A spawn failure is a failed execution with its cause, and it has a receipt.
		b.finish(e, runner.Result{Status: runner.StatusFailed, ExitCode: -1, StartedAt: r.now, FinishedAt: b.Now(), Err: err})
		return e, nil
	}
	b.started(e, proc, cgroupPath)
	go func() {
		b.finish(e, proc.Wait())
		proc.Delivered() // the receipt is committed: the spawn pools may refill now
		b.fs.RefillTmp() // and the TMPDIRs made ahead
	}()
	return e, nil
}

// spawn commits the intent while the runner starts the command: it spawns
// the launcher, which waits on its configuration pipe, and only once the
// intent is committed (BeforeRelease) does it receive the command. A crash
// before that leaves a launcher that never got its command (it dies with
// termd) and, at most, an intent that becomes outcome_unknown. It returns
// the runner's answer and the intent's.
func (b *Broker) spawn(e *execRec, spec runner.Spec, in receiptstore.Intent) (*runner.Process, error, error) {
	intent := make(chan error, 1)
	checked := time.Now()
	e.stage[stages.Check] = checked.Sub(e.begun)
	go func() {
		var wt receiptstore.WriteTimes
		err := b.Store.AppendIntentTimed(in, &wt)
		e.stage[stages.Intent] = time.Since(checked) // read after <-intent
		e.stage.Write(stages.IntentEncode, wt)
		intent <- err
	}()
	var intentErr error
	waited := false
	waitIntent := func() error {
		if !waited {
			intentErr, waited = <-intent, true
		}
		return intentErr
	}
	var released time.Time
	spec.BeforeRelease = func() error {
		e.stage[stages.Launch] = time.Since(checked)
		b.stall("spawn")
		if err := waitIntent(); err != nil {
			return fmt.Errorf("the execution intent could not be recorded: %w", err)
		}
		b.stall("release")
		released = time.Now()
		return nil
	}
	proc, err := b.Runner.Start(spec)
	if spec.Stdin != nil {
		spec.Stdin.Close() // the command has its own descriptor
	}
	e.spawned = time.Now()
	e.stage[stages.Spawn] = e.spawned.Sub(checked)
	if !released.IsZero() {
		e.stage[stages.Release] = e.spawned.Sub(released)
	}
	return proc, err, waitIntent()
}

// started records a spawned command: where its leftovers would be found,
// its process in the execution, and the event saying it started.
func (b *Broker) started(e *execRec, proc *runner.Process, cgroupPath string) {
	pid, start := proc.Identity()
	if proc.CgroupPath() == "" || proc.CgroupPath() != cgroupPath {
		// Without a known cgroup, leftovers are found by process group
		// (and the start time tells the process from a later one with its pid).
		_ = b.Store.RecordSpawn(e.id, pid, pid, start, proc.CgroupPath())
	}
	if e.hub != nil {
		e.hub.SetProcess(proc)
	}
	b.mu.Lock()
	e.proc = proc
	e.e.Pid = int32(pid)
	e.e.Cgroup = proc.CgroupPath() != ""
	stop := e.stopReason != ""
	snap := proto.Clone(e.e).(*termdv1.Execution)
	b.unlock()
	if stop {
		_ = proc.Cancel()
	}
	b.Bus.Publish(e.plan.session.ID, termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Execution{Execution: snap} })
}

// abandon cancels an execution whose foreground client went away.
func (b *Broker) abandon(e *execRec, why string) {
	b.mu.Lock()
	if e.finished || e.stopReason != "" {
		b.unlock()
		return
	}
	e.stopReason = why
	proc := e.proc
	b.unlock()
	if proc != nil {
		_ = proc.Cancel()
	}
}

// endedLocked marks an execution finished: it no longer counts against its
// requester's cap (sessions.max_running).
func (b *Broker) endedLocked(e *execRec) {
	e.finished = true
	if b.runningBy[e.who]--; b.runningBy[e.who] <= 0 {
		delete(b.runningBy, e.who)
	}
}

// refuse undoes a reservation when the plan could not start.
func (b *Broker) refuse(e *execRec, why string) {
	e.releaseSandbox()
	b.mu.Lock()
	defer b.unlock()
	p := e.plan
	if err := b.transition(p, domain.PlanExpired); err != nil {
		b.Log.Error("refusing a start", "plan", p.p.Id, "error", err)
	}
	p.p.ExecutionId = ""
	p.p.NextStep = why + fmt.Sprintf(" (run `termctl replan %s`)", p.p.Id)
	b.endedLocked(e)
	close(e.done)
	delete(b.execs, e.id)
	p.session.DropRunning(e)
	b.running.Done()
	b.publishPlan(p, termdv1.EventKind_EVENT_KIND_PLAN_EXPIRED)
	b.decisionReceiptLocked(p, "expired", nil, why)
	if e.closeSessionAfter && !p.session.Busy() {
		// The session was closed while this start was being checked: its
		// streams end now, as they would after a run.
		b.publishSessionClosed(p.session)
	}
}

// spec builds the bounded process description from a fresh decision
// (executions.Launches.Spec), joining the execution's network where it is
// made.
func (b *Broker) spec(e *execRec, d policy.Decision, requester *termdv1.Principal, paths pathmemo.Memo) (runner.Spec, error) {
	return b.launches.Spec(&e.Setup, d, executions.Start{
		ID: e.id, PlanID: e.plan.p.Id, SessionID: e.plan.session.ID, Requester: requester, Paths: paths,
		KeepTail: e.storageTail != "", Term: terminals.TermName(d.TTY),
		Network:  func() (executions.Network, error) { return b.joinNetwork(e, d) },
		Terminal: func() *runner.TTY { return b.terminalFor(e, d, requester) },
		Feed: func(off int64, chunk []byte) {
			if e.hub != nil {
				e.hub.Feed(off, chunk)
			}
		},
	})
}

// terminalFor is a PTY execution's terminal, with its hub.
func (b *Broker) terminalFor(e *execRec, d policy.Decision, requester *termdv1.Principal) *runner.TTY {
	e.hub = newTermHub(b, e, d.TTY, requester)
	e.e.Tty = wire.TerminalProto(d.TTY)
	e.e.InputHolder = requester.GetName()
	return &runner.TTY{Rows: d.TTY.Rows, Cols: d.TTY.Cols, Idle: d.TTY.Idle}
}

// finish records the final state: receipt first (durable), then state and events.
func (b *Broker) finish(e *execRec, res runner.Result) {
	for _, s := range []runner.Stream{runner.Stdout, runner.Stderr} {
		if ls := e.Out[s]; ls != nil {
			ls.Close()
		}
	}
	if e.hub != nil {
		e.hub.End()
	}
	b.mu.Lock()
	detail := b.endDetailLocked(e, res)
	r := b.finalReceipt(e.plan, e, res, detail) // stops the egress proxy: its summary is in r
	b.unlock()

	// The sandbox (private TMPDIR, network namespace, launcher files) is
	// let go of while the receipt commits, off the result's path: nothing
	// in the receipt depends on it, and it is gone before anything below
	// (the final state, the events) says the execution ended.
	released := make(chan struct{})
	go func() { e.releaseSandbox(); close(released) }()
	ended := time.Now()
	var wt receiptstore.WriteTimes
	stored, err := b.Store.AppendTimed(r, &wt)
	receipted := time.Now()
	<-released
	if stored != nil {
		b.receipts.KeepShare(stored)
	}
	timed := !e.spawned.IsZero() && res.Err == nil && err == nil
	t := e.stage
	if timed {
		t[stages.Run] = ended.Sub(e.spawned)
		if !res.ExitedAt.IsZero() {
			t[stages.Exit] = res.ExitedAt.Sub(e.spawned)
			t[stages.Teardown] = res.FinishedAt.Sub(res.ExitedAt)
		}
		t[stages.Receipt] = receipted.Sub(ended)
		t.Write(stages.ReceiptEncode, wt)
		t[stages.Total] = receipted.Sub(e.begun)
	}

	b.mu.Lock()
	record := b.endLocked(e, res, detail, stored, err)
	b.unlock()
	if timed && b.Stages != nil {
		t[stages.Settle] = time.Since(receipted)
		b.Stages.Record(t)
	}
	record()
	b.running.Done()
}

// endDetailLocked says why an execution ended, when its end needs saying
// (the receipt's detail, the execution's error).
func (b *Broker) endDetailLocked(e *execRec, res runner.Result) string {
	detail := ""
	if res.Err != nil {
		detail = "the command could not be started: " + res.Err.Error()
	} else if res.IdleTimedOut {
		detail = fmt.Sprintf("the terminal was idle (no output and no input) for %s and the execution was ended", e.hub.Idle())
	} else if res.Status == runner.StatusTimedOut {
		detail = executions.TimeoutDetail(e.Timeout, b.Policy.Current().Limits().MaxTimeout)
	} else if res.Status == runner.StatusOutputLimit {
		detail = fmt.Sprintf("the command wrote more than the output budget of %d bytes (policy limits.output_budget) and was ended; its first %d bytes per stream are kept", b.Policy.Current().Limits().OutputBudget, b.Policy.Current().Limits().OutputBytes)
	} else if res.Status == runner.StatusCancelled {
		switch {
		case e.stopReason != "":
			detail = e.stopReason
		case e.cancelledBy != nil:
			detail = "cancelled by " + e.cancelledBy.Name
		}
	}
	if e.storageTail != "" {
		detail = strings.TrimPrefix(detail+"; "+e.storageTail, "; ")
	}
	return detail
}

// endLocked moves the plan and the execution to their final state (or
// outcome_unknown when the receipt could not be stored: storeErr) and says
// so; it returns the journal's write of the plan's end, to run after the
// mutex is released (the receipt is the durable record of the end).
func (b *Broker) endLocked(e *execRec, res runner.Result, detail string, stored *receipt.Receipt, storeErr error) (record func()) {
	p := e.plan
	st, ok := domain.EndState(string(res.Status))
	if !ok {
		st = domain.ExecFailed
	}
	if storeErr != nil {
		b.Log.Error("could not store the receipt; the intent stays open and becomes outcome_unknown at restart", "execution", e.id, "error", storeErr)
		st = domain.ExecOutcomeUnknown
	}
	if err := b.transition(p, st.PlanState()); err != nil {
		b.Log.Error("finishing an execution", "execution", e.id, "error", err)
	}
	ee := e.e
	ee.State = st.Proto()
	ee.FinishedAt = timestamppb.New(res.FinishedAt)
	ee.DurationMs = res.Duration.Milliseconds()
	ee.ExitCode = int32(res.ExitCode)
	ee.Signal = res.Signal
	ee.StdoutBytes, ee.StderrBytes = res.Stdout.Total, res.Stderr.Total
	ee.OutputTruncated = res.Stdout.Truncated || res.Stderr.Truncated
	ee.NetworkIsolated = res.NetNSApplied
	ee.Error = detail
	if stored != nil {
		ee.ReceiptId = stored.ID
		p.p.ReceiptId = stored.ID
	}
	p.p.NextStep = nextStep(p.p)
	record = b.journalPlanAfter(p)
	b.endedLocked(e)
	if b.Metrics != nil {
		b.Metrics.ExecutionFinished(string(res.Status), res.Duration, res.Stdout.Total+res.Stderr.Total)
	}
	e.proc = nil // output is now served from the receipt
	s := p.session
	s.DropRunning(e)
	s.Touch(b.Now())
	b.publishEndLocked(e, stored)
	if e.closeSessionAfter && !s.Busy() {
		b.publishSessionClosed(s)
	}
	close(e.done)
	return record
}

// publishEndLocked publishes an execution's end events (FINISHED, then
// RECEIPT_SIGNED when its receipt was stored) and keeps them (e.ends).
func (b *Broker) publishEndLocked(e *execRec, stored *receipt.Receipt) {
	sid := e.plan.session.ID
	snap := proto.Clone(e.e).(*termdv1.Execution)
	if ev := b.Bus.Publish(sid, termdv1.EventKind_EVENT_KIND_FINISHED, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Execution{Execution: snap} }); ev != nil {
		e.ends = append(e.ends, ev)
	}
	if stored != nil {
		sum := receiptq.Summary(stored)
		if ev := b.Bus.Publish(sid, termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Receipt{Receipt: sum} }); ev != nil {
			e.ends = append(e.ends, ev)
		}
	}
}

// execLocked finds an execution the caller may see.
func (b *Broker) execLocked(caller *termdv1.Principal, id string) (*execRec, error) {
	if id == "" {
		return nil, errdefs.Invalid("execution_id is empty")
	}
	e, ok := b.execs[id]
	if !ok || !domain.Visible(caller, e.plan.session.Owner) {
		return nil, errdefs.NotFound("execution %s not found", id)
	}
	return e, nil
}

// GetExecution returns an execution's status.
func (b *Broker) GetExecution(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	b.mu.Lock()
	e, err := b.execLocked(caller, id)
	if err == nil {
		defer b.unlock()
		return b.execSnapshotLocked(e), nil
	}
	b.unlock()
	// A finished execution whose plan was forgotten: its receipt tells.
	if past, _, perr := b.pastExecution(caller, id); past != nil || perr != nil {
		return past, perr
	}
	return nil, err
}

// control runs pause, resume or cancel on a running execution.
func (b *Broker) control(caller *termdv1.Principal, id, verb string) (*termdv1.Execution, error) {
	b.mu.Lock()
	e, err := b.execLocked(caller, id)
	if err == nil && !domain.OwnerOrOperator(caller, e.plan.session.Owner) {
		err = errdefs.Permission("execution %s belongs to %s; only its owner or an operator may %s it", id, e.plan.session.Owner.Name, verb)
	}
	if err == nil && (e.finished || e.proc == nil) {
		err = executions.NotRunning(id, e.e.State, verb)
	}
	if err != nil {
		b.unlock()
		return nil, err
	}
	proc, p := e.proc, e.plan
	b.unlock()
	if verb == "cancel" {
		b.mu.Lock()
		e.cancelledBy = caller
		b.unlock()
	}
	kind, err := executions.Control(proc, id, verb)
	if err != nil {
		return nil, err
	}
	if verb == "cancel" {
		<-e.done
		b.mu.Lock()
		defer b.unlock()
		return proto.Clone(e.e).(*termdv1.Execution), nil
	}
	b.mu.Lock()
	defer b.unlock()
	if !e.finished {
		if verb == "pause" {
			e.e.State = termdv1.ExecutionState_EXECUTION_STATE_PAUSED
			_ = b.transition(p, domain.PlanPaused)
		} else {
			e.e.State = termdv1.ExecutionState_EXECUTION_STATE_RUNNING
			_ = b.transition(p, domain.PlanRunning)
		}
		_ = b.journalPlanLocked(p)
		snap := proto.Clone(e.e).(*termdv1.Execution)
		b.Bus.Publish(p.session.ID, kind, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Execution{Execution: snap} })
		p.session.Touch(b.Now())
	}
	return proto.Clone(e.e).(*termdv1.Execution), nil
}

// PauseExecution freezes every process of an execution.
func (b *Broker) PauseExecution(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	return b.control(caller, id, "pause")
}

// ResumeExecution thaws a paused execution.
func (b *Broker) ResumeExecution(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	return b.control(caller, id, "resume")
}

// CancelExecution ends an execution and waits for its receipt.
func (b *Broker) CancelExecution(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	return b.control(caller, id, "cancel")
}

// ReadOutput reads redacted output by offset, while or after the command
// runs (executions.ReadOutput).
func (b *Broker) ReadOutput(_ context.Context, caller *termdv1.Principal, r *termdv1.ReadOutputRequest) (*termdv1.ReadOutputResponse, error) {
	return executions.ReadOutput(r, func() (executions.Output, error) {
		b.mu.Lock()
		e, err := b.execLocked(caller, r.ExecutionId)
		if err != nil {
			b.unlock()
			// A finished execution whose plan was forgotten: read its receipt.
			past, _, perr := b.pastExecution(caller, r.ExecutionId)
			if perr != nil {
				return executions.Output{}, perr
			}
			if past == nil {
				return executions.Output{}, err
			}
			e = &execRec{e: past, finished: true}
			b.mu.Lock()
		}
		defer b.unlock()
		return executions.Output{Proc: e.proc, ReceiptID: e.e.ReceiptId, Exec: proto.Clone(e.e).(*termdv1.Execution), Finished: e.finished, Redactor: e.Redactor}, nil
	}, b.Store.Get)
}

// stall holds termd at point when a test asked for it (Deps.Stall).
func (b *Broker) stall(point string) {
	if b.Stall != nil {
		b.Stall(point)
	}
}
