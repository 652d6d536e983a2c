package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/broker/stages"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/netns"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/daemon/sandbox/launcher"
	"github.com/termd/termd/internal/netmode"
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

	// out holds the live, redacted output offsets; owned by the reader goroutines.
	out [3]*liveStream
	// hub is a PTY execution's terminal (terminal.go); nil otherwise. Set
	// before the spawn and never changed.
	hub *termHub

	// redactor redacts everything this execution produces: termd's
	// redactor plus the values (and encoded forms) of the credentials it
	// received. Set before the spawn and never changed after.
	redactor *receiptstore.Redactor
	// credentials are the names of the credentials it received.
	credentials []string
	// gitIdentity is the git identity termd supplied (nil: the request
	// set its own); set before the spawn.
	gitIdentity *receipt.GitIdentity
	// timeout is the command's time limit; set before the spawn.
	timeout time.Duration
	// stdin is the command's standard input (its plan's), until spec
	// opens it for the command; nil: /dev/null.
	stdin []byte

	// launch confines the command (nil: no sandbox); sandbox is what the
	// receipt records of it; tmp is its private TMPDIR, removed at the end.
	launch  *launcher.Launch
	sandbox *sandbox.Record
	tmp     string
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
	// (egress.go); nil otherwise.
	egress *egressRun

	// begun is when Execute was called; stage holds the stage durations
	// known so far (daemon/broker/stages), completed by finish.
	begun   time.Time
	spawned time.Time
	stage   stages.Times
}

// liveStream redacts one output stream as it arrives and publishes it as
// events, coalesced: output that trickles in goes out at most once per
// stream every liveInterval (plus a last one at the end), so chatty output
// costs every viewer a bounded number of events per second; a full event
// (liveEventMax) goes out at once, so a flood costs a bounded number of
// events per byte and never waits for a slot (a viewer that cannot keep up
// falls behind the ring and is told so; the command is never slowed for it).
type liveStream struct {
	mu        sync.Mutex
	red       *receiptstore.StreamRedactor
	offset    int64
	pending   []byte // redacted, not yet published
	lastFlush time.Time
	flush     *time.Timer // publishes pending at the next slot; nil when not armed
	publish   func(at int64, data []byte)
	idle      *time.Timer // flushes the redactor's held tail when output pauses
	closed    bool
}

// idleFlush is how long output may pause before the complete lines in the
// redactor's held-back tail (up to 4 KiB, kept to catch secrets split across
// writes) go out: a program that prints a line and then works must be seen
// live. The unfinished last line stays held, so a secret written in two
// pieces of one line is still caught.
const idleFlush = 200 * time.Millisecond

// liveInterval and liveEventMax bound live output: at most 1/liveInterval
// partial output events per second per stream, and full events of about
// liveEventMax bytes.
const (
	liveInterval = 50 * time.Millisecond
	liveEventMax = 512 << 10
)

// write passes a chunk to the redactor and re-arms the idle flush.
func (ls *liveStream) write(chunk []byte) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	_, _ = ls.red.Write(chunk)
	if len(ls.pending) >= liveEventMax && !ls.closed {
		ls.flushLocked()
	}
	ls.armLocked()
	if ls.idle == nil {
		ls.idle = time.AfterFunc(idleFlush, func() {
			ls.mu.Lock()
			defer ls.mu.Unlock()
			if !ls.closed {
				_ = ls.red.FlushLines()
				ls.armLocked()
			}
		})
	} else {
		ls.idle.Reset(idleFlush)
	}
}

// add takes redacted text from the redactor (called with ls.mu held).
func (ls *liveStream) add(p string) { ls.pending = append(ls.pending, p...) }

// armLocked schedules the publication of pending output at the next slot.
func (ls *liveStream) armLocked() {
	if len(ls.pending) == 0 || ls.flush != nil || ls.closed {
		return
	}
	ls.flush = time.AfterFunc(max(time.Until(ls.lastFlush.Add(liveInterval)), 0), func() {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		ls.flush = nil
		if !ls.closed {
			ls.flushLocked()
		}
	})
}

// flushLocked publishes pending output as one event.
func (ls *liveStream) flushLocked() {
	ls.lastFlush = time.Now()
	if len(ls.pending) == 0 {
		return
	}
	data := ls.pending
	ls.pending = nil
	switch {
	case len(data) >= liveEventMax:
		// A flood: the next event will be as large, so its buffer is made
		// at that size at once instead of grown by copying (up to a read
		// and the redactor's hold more than liveEventMax).
		ls.pending = make([]byte, 0, len(data)+len(data)/4)
	case cap(data) > 2*len(data)+4096:
		// The last of a flood: the event keeps only what it holds.
		data = append([]byte(nil), data...)
	}
	at := ls.offset
	ls.offset += int64(len(data))
	ls.publish(at, data)
}

// close flushes the tail for good.
func (ls *liveStream) close() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.idle != nil {
		ls.idle.Stop()
	}
	if ls.flush != nil {
		ls.flush.Stop()
		ls.flush = nil
	}
	ls.closed = true
	_ = ls.red.Close()
	ls.flushLocked()
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
// signed. The caller owns a foreground execution: when its stream ends first
// (the client was killed, its pipe broke, its terminal closed), the execution
// is cancelled and gets a receipt saying why. A detached one keeps running.
func (b *Broker) ExecuteAndWait(ctx context.Context, caller *termdv1.Principal, planID, sessionID string, detach bool, send func(*termdv1.Event) error) (err error) {
	release, err := b.acquireStream(caller)
	if err != nil {
		return err
	}
	defer release()
	b.mu.Lock()
	p, err := b.planLocked(caller, planID)
	var since uint64
	if err == nil {
		since = b.Bus.LastSeq(p.session.id)
	}
	b.unlock()
	if err != nil {
		return err
	}
	sub, err := b.Bus.Subscribe(p.session.id, since)
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
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil // session closed: its events ended
		}
		if !eventOf(ev, e.id, planID) {
			continue
		}
		if err := send(ev); err != nil {
			return err
		}
		if ev.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED && ev.GetReceipt().GetPlanId() == planID {
			return nil
		}
		if ev.Kind != termdv1.EventKind_EVENT_KIND_LAGGED && ev.Kind != termdv1.EventKind_EVENT_KIND_FINISHED {
			continue
		}
		// A reader that fell behind the session's ring (other executions
		// of the session wrote a lot) may have been skipped past this
		// execution's end: without it the stream would wait forever. The
		// end events it missed are sent again (they keep their seq). An
		// end without a stored receipt ends at FINISHED.
		missed, over := b.endsUpTo(e, ev.Seq)
		if ev.Kind == termdv1.EventKind_EVENT_KIND_LAGGED {
			for _, m := range missed {
				if err := send(m); err != nil {
					return err
				}
			}
		}
		if over {
			return nil
		}
	}
}

// endsUpTo returns e's end events with a seq at most seq, and whether its
// last end event is among them (nothing more will come for e).
func (b *Broker) endsUpTo(e *execRec, seq uint64) (missed []*termdv1.Event, over bool) {
	b.mu.Lock()
	ends := e.ends
	b.unlock()
	for _, ev := range ends {
		if ev.Seq <= seq {
			missed = append(missed, ev)
		}
	}
	return missed, len(ends) > 0 && ends[len(ends)-1].Seq <= seq
}

func eventOf(ev *termdv1.Event, execID, planID string) bool {
	switch p := ev.Payload.(type) {
	case *termdv1.Event_Execution:
		return p.Execution.Id == execID
	case *termdv1.Event_Output:
		return p.Output.ExecutionId == execID
	case *termdv1.Event_Receipt:
		return p.Receipt.PlanId == planID
	case *termdv1.Event_Lagged:
		return true
	case *termdv1.Event_EgressRefused:
		return p.EgressRefused.ExecutionId == execID
	}
	return false
}

// start checks everything, records the intent durably, and spawns.
func (b *Broker) start(caller *termdv1.Principal, planID, sessionID string) (*execRec, error) {
	begun := time.Now()
	tail, err := b.storageAllows(caller)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.closing {
		b.unlock()
		return nil, errdefs.Unavailable("termd is shutting down; nothing new starts")
	}
	p, err := b.planLocked(caller, planID)
	if err != nil {
		b.unlock()
		return nil, err
	}
	s := p.session
	if sessionID != "" && sessionID != s.id {
		b.unlock()
		return nil, errdefs.Precondition("plan %s belongs to session %s, not %s; a plan runs only in its own session", planID, s.id, sessionID)
	}
	if !domain.OwnerOrOperator(caller, s.owner) {
		b.unlock()
		return nil, errdefs.Permission("plan %s belongs to %s; only its owner or an operator may execute it", planID, s.owner.Name)
	}
	// A command runs as its requester: only the requester (or an operator)
	// may start it, or an agent could run an operator's plan with the
	// operator's uid (an operator may plan or replan in an agent's session).
	if !domain.IsOperator(caller) && domain.PrincipalKey(caller) != domain.PrincipalKey(p.p.Requester) {
		b.unlock()
		return nil, errdefs.Permission("plan %s was requested by %s and runs as that principal; only its requester or an operator may execute it", planID, p.p.Requester.GetName())
	}
	if s.closed {
		b.unlock()
		return nil, errdefs.Precondition("session %s is closed; replan in an open session (`termctl replan %s`)", s.id, planID)
	}
	switch p.state() {
	case domain.PlanPlanned, domain.PlanApproved:
	default:
		st, hint := p.p.State, hintFor(p.p) // read under the lock: the plan may be finishing
		b.unlock()
		return nil, errdefs.Precondition("plan %s is in state %s and cannot be executed%s", planID, stateWord(st), hint)
	}
	who := domain.PrincipalKey(p.p.Requester)
	if n, max := b.runningBy[who], b.Config().Sessions.MaxRunning; n >= max {
		b.unlock()
		return nil, errdefs.Exhausted("%s already has %d commands running (the per-principal cap, sessions.max_running); wait for one to finish, or cancel one (`termctl sessions list` shows them)", p.p.Requester.GetName(), n)
	}
	stdin := p.stdin // let go of by the transition: the execution holds it now
	// Reserve the plan so it cannot start twice while we re-check outside the lock.
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
		redactor:    b.Redactor,
		stdin:       stdin,
		e: &termdv1.Execution{
			PlanId:    p.p.Id,
			SessionId: s.id,
			State:     termdv1.ExecutionState_EXECUTION_STATE_RUNNING,
			StartedAt: timestamppb.New(now),
		},
	}
	e.e.Id = e.id
	e.stage[stages.Plan] = p.planned
	s.addRunning(e)
	s.touch(now)
	p.p.ExecutionId = e.id
	p.p.NextStep = nextStep(p.p)
	// The intent below is the durable record of the start; the journal's
	// record of it is encoded and written just after the mutex is released,
	// before the intent, and before anything else can change this plan (its
	// next change comes from this goroutine or after the spawn).
	record := b.journalPlanAfter(p)
	b.execs[e.id] = e
	e.who = who
	b.runningBy[who]++
	b.running.Add(1)
	req, approved := p.req, p.dec
	requester := p.p.Requester
	b.unlock()
	record()

	// Re-check what may have changed since the plan was decided and approved.
	fresh := b.decide(requester, req)
	// The plan holds its decision as shown (redacted): compare the fresh one
	// in that form. The request hash, computed on the real request, still
	// binds exactly what runs.
	shown := fresh
	b.redactDecision(&shown)
	msg := stale(approved, shown)
	if msg == "" && p.p.GrantId != "" {
		if why := b.grantStillCovers(p, fresh); why != "" {
			msg = "the grant that approved it no longer covers it: " + why
		}
	}
	if msg != "" {
		b.refuse(e, "plan is stale; replan: "+msg)
		return nil, errdefs.Precondition("plan is stale; replan (`termctl replan %s`): %s", planID, msg)
	}
	spec, err := b.spec(e, fresh, requester)
	if err != nil {
		b.refuse(e, err.Error())
		return nil, err
	}
	draft := b.draftReceipt(p, now)
	draft.Credentials = e.credentials
	draft.Sandbox = receiptSandbox(e.sandbox, !fresh.Sandbox.Network && b.Runner.Capabilities().NetNS, fresh.Sandbox.NetworkMode)
	e.receiptHostIdentity(draft)
	// The cgroup path is known before the spawn, so a crash at any moment
	// leaves enough to find and kill what the command started.
	cgroupPath := ""
	if b.Runner.Capabilities().CgroupV2 != "" {
		cgroupPath = b.Runner.Reserve(spec)
	}
	// The intent is made durable while the launcher starts: the runner
	// spawns it, it waits on its configuration pipe, and only once the
	// intent is committed (BeforeRelease) does it receive the command. A
	// crash before that leaves a launcher that never got its command (it
	// dies with termd) and, at most, an intent that becomes outcome_unknown.
	intent := make(chan error, 1)
	checked := time.Now()
	e.stage[stages.Check] = checked.Sub(begun)
	go func() {
		var wt receiptstore.WriteTimes
		err := b.Store.AppendIntentTimed(receiptstore.Intent{ExecutionID: e.id, PlanID: p.p.Id, SessionID: s.id, StartedAt: now, CgroupPath: cgroupPath, Receipt: draft}, &wt)
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
	if ierr := waitIntent(); ierr != nil {
		if proc != nil {
			proc.Wait() // nothing ran: the runner refused to release it
		}
		b.refuse(e, "could not record the execution intent: "+ierr.Error())
		return nil, errdefs.Internal("recording the execution intent durably failed (%v); nothing was started", ierr)
	}
	if err != nil {
		// A spawn failure is a failed execution with its cause, and it has a receipt.
		b.finish(e, runner.Result{Status: runner.StatusFailed, ExitCode: -1, StartedAt: now, FinishedAt: b.Now(), Err: err})
		return e, nil
	}
	pid, _ := proc.Identity()
	if proc.CgroupPath() == "" || proc.CgroupPath() != cgroupPath {
		// Without a known cgroup, leftovers are found by process group.
		_ = b.Store.RecordSpawn(e.id, pid, pid, proc.CgroupPath())
	}
	if e.hub != nil {
		e.hub.proc.Store(proc)
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
	b.Bus.Publish(s.id, termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Execution{Execution: snap} })
	go func() {
		b.finish(e, proc.Wait())
		proc.Delivered() // the receipt is committed: the spawn pools may refill now
		b.refillTmp()    // and the TMPDIRs made ahead
	}()
	return e, nil
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

// stale compares an approved decision with a fresh one.
func stale(was, now policy.Decision) string {
	switch {
	case now.Verdict == policy.Deny:
		return "the policy now denies it"
	case was.BinarySHA256 != now.BinarySHA256 || was.ResolvedPath != now.ResolvedPath:
		return fmt.Sprintf("the program changed (%s)", now.ResolvedPath)
	case was.Cwd != now.Cwd:
		return fmt.Sprintf("the working directory now resolves to %s, not %s", now.Cwd, was.Cwd)
	case was.PolicyVersion != now.PolicyVersion:
		return "the policy changed since the plan was decided"
	case !maps.Equal(was.ProjectFiles, now.ProjectFiles):
		var changed []string
		for f, sum := range now.ProjectFiles {
			if was.ProjectFiles[f] != sum {
				changed = append(changed, f)
			}
		}
		slices.Sort(changed)
		return "project files it runs changed since the plan was decided: " + strings.Join(changed, ", ")
	case was.RequestHash != now.RequestHash:
		return "the canonical request changed"
	}
	return ""
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
	p.session.dropRunning(e)
	b.running.Done()
	b.publishPlan(p, termdv1.EventKind_EVENT_KIND_PLAN_EXPIRED)
	b.decisionReceiptLocked(p, "expired", nil, why)
	if e.closeSessionAfter && !p.session.busy() {
		// The session was closed while this start was being checked: its
		// streams end now, as they would after a run.
		b.publishSessionClosed(p.session)
	}
}

// spec builds the bounded process description from a fresh decision.
func (b *Broker) spec(e *execRec, d policy.Decision, requester *termdv1.Principal) (runner.Spec, error) {
	pol := b.Policy.Current()
	lim := pol.Limits()
	uid, gid := os.Geteuid(), os.Getegid()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		runAs := ""
		if d.RunAs != "" {
			runAs = d.RunAs
		} else if rr := b.Config().RunAsRequester; rr == nil || *rr {
			runAs = strconv.FormatUint(uint64(requester.GetUid()), 10)
		}
		if runAs != "" {
			c, err := credentialFor(runAs)
			if err != nil {
				return runner.Spec{}, errdefs.Precondition("cannot run as %s: %v", runAs, err)
			}
			cred, uid, gid = c, int(c.Uid), int(c.Gid)
			if c.Uid == 0 && c.Gid == 0 {
				cred = nil
			}
		}
	}
	if err := b.networkAvailable(d); err != nil {
		return runner.Spec{}, err
	}
	if m := netmode.Mode(d.Sandbox.NetworkMode); m.IsEgress() {
		if err := b.startEgress(e, m); err != nil {
			return runner.Spec{}, err
		}
	}
	b.joinLoopback(e, d)
	home, err := b.homeFor(uid, gid)
	if err != nil {
		return runner.Spec{}, errdefs.Internal("preparing HOME for the command: %v", err)
	}
	rec, tmp, err := b.sandboxFor(e, d, home, uid, gid)
	if err != nil {
		return runner.Spec{}, err
	}
	e.sandbox, e.tmp = rec, tmp
	env := map[string]string{}
	for k, v := range d.Env {
		env[k] = v
	}
	for k, v := range d.ExecEnv {
		env[k] = v
	}
	fixed := map[string]string{
		"PATH":             joinPath(pol.TrustedPath()),
		"HOME":             home,
		"LANG":             "C.UTF-8",
		"TERM":             termName(d.TTY),
		"NO_COLOR":         "1",
		"PAGER":            "cat",
		"GIT_PAGER":        "cat",
		"TERMD_SESSION_ID": e.plan.session.id,
		"TERMD_PLAN_ID":    e.plan.p.Id,
		"TERMD_EXECUTION":  e.id,
		"TMPDIR":           tmp,
	}
	if a, err := config.LookupUID(uint32(uid)); err == nil {
		fixed["USER"], fixed["LOGNAME"] = a.User.Username, a.User.Username
	}
	for k, v := range fixed {
		env[k] = v
	}
	if e.egress != nil {
		for k, v := range e.egress.env {
			env[k] = v
		}
	}
	if e.gitIdentity, err = b.supplyGitIdentity(env, tmp, requester, uid, gid); err != nil {
		return runner.Spec{}, err
	}
	if len(d.Credentials) > 0 {
		values, err := b.injectCredentials(d, env, tmp, uid, gid)
		if err != nil {
			return runner.Spec{}, err
		}
		var forms []string
		for _, v := range values {
			forms = append(forms, redactionForms(v)...)
		}
		e.redactor, e.credentials = b.Redactor.With(forms...), slices.Clone(d.Credentials)
	}
	stdinFile, err := b.stdinFile(e, d, tmp, uid, gid)
	if err != nil {
		return runner.Spec{}, err
	}
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)
	argv := d.ExecArgv
	if len(argv) == 0 {
		argv = d.Argv
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = lim.DefaultTimeout
	}
	e.timeout = timeout
	for _, s := range []runner.Stream{runner.Stdout, runner.Stderr} {
		ls := &liveStream{publish: func(at int64, data []byte) { b.publishOutput(e, s, at, data) }}
		ls.red = e.redactor.NewStream(eventWriter{ls}, 0)
		e.out[s] = ls
	}
	outputCap := lim.OutputBytes
	if e.storageTail != "" {
		outputCap = min(outputCap, b.Config().Storage.TailBytes)
	}
	var tty *runner.TTY
	if d.TTY != nil {
		tty = &runner.TTY{Rows: d.TTY.Rows, Cols: d.TTY.Cols, Idle: d.TTY.Idle}
		e.hub = newTermHub(b, e, d.TTY, requester)
		e.e.Tty = terminalProto(d.TTY)
		e.e.InputHolder = requester.GetName()
	}
	return runner.Spec{
		ID:           e.id,
		KeepTail:     e.storageTail != "",
		Path:         d.ResolvedPath,
		Argv:         argv,
		Dir:          d.Cwd,
		Env:          envList,
		Timeout:      timeout,
		Grace:        lim.Grace,
		OutputCap:    outputCap,
		OutputBudget: lim.OutputBudget,
		MemoryMax:    lim.MemoryBytes,
		PidsMax:      lim.Pids,
		NoNetwork:    !d.Sandbox.Network && e.netns == nil,
		JoinNetNS:    e.netns != nil || e.egress != nil,
		NetNSFD:      e.netNSFD(),
		Credential:   cred,
		Launch:       e.launch,
		NewHash:      b.Keys.NewDigest,
		TTY:          tty,
		Stdin:        stdinFile,
		OnOutput: func(s runner.Stream, off int64, chunk []byte) {
			if e.hub != nil {
				e.hub.feed(off, chunk)
			}
			e.out[s].write(chunk)
		},
	}, nil
}

// timeoutDetail says that a command ran out of time and how to ask for more:
// timeout_seconds (MCP) or --timeout (termctl), up to the policy's
// max_timeout.
func timeoutDetail(timeout, max time.Duration) string {
	msg := fmt.Sprintf("the command ran for its time limit of %s and was ended", timeout)
	if max > timeout {
		return msg + fmt.Sprintf("; to give it longer, plan it again with a longer limit: timeout_seconds (MCP, e.g. %d) or termctl run --timeout %s; at most the policy's limits.max_timeout of %s", int(max.Seconds()), max, max)
	}
	return msg + "; that is the policy's limits.max_timeout: an operator may raise it (docs/POLICY.md), or split the work"
}

func joinPath(dirs []string) string {
	out := ""
	for i, d := range dirs {
		if i > 0 {
			out += ":"
		}
		out += d
	}
	return out
}

// credentialFor is the uid, gid and groups a command runs with. A uid (a
// plan runs as its requester by default) is looked up through
// config.LookupUID, the account cache the RPCs use (5 s, flushed on
// SIGHUP): reading the passwd and group files at every start was ~1% of
// termd's CPU per execution.
func credentialFor(who string) (*syscall.Credential, error) {
	var u *user.User
	var ids []string
	err := errors.New("not a uid")
	if n, perr := strconv.ParseUint(who, 10, 32); perr == nil {
		var a *config.Account
		if a, err = config.LookupUID(uint32(n)); err == nil {
			u, ids = a.User, a.Groups
		}
	}
	if err != nil {
		if u, err = user.Lookup(who); err != nil {
			// A uid without a passwd entry still runs as itself.
			if n, perr := strconv.ParseUint(who, 10, 32); perr == nil {
				return &syscall.Credential{Uid: uint32(n), Gid: uint32(n)}, nil
			}
			return nil, err
		}
		ids, _ = u.GroupIds()
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	for _, g := range ids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			c.Groups = append(c.Groups, uint32(n))
		}
	}
	return c, nil
}

// eventWriter receives redacted output for its liveStream.
type eventWriter struct{ ls *liveStream }

// WriteString takes the redactor's text.
func (w eventWriter) WriteString(s string) (int, error) { w.ls.add(s); return len(s), nil }

func (w eventWriter) Write(p []byte) (int, error) { w.ls.add(string(p)); return len(p), nil }

// publishOutput sends one coalesced piece of an execution's output as an event.
func (b *Broker) publishOutput(e *execRec, s runner.Stream, at int64, data []byte) {
	stream := termdv1.OutputStream_OUTPUT_STREAM_STDOUT
	if s == runner.Stderr {
		stream = termdv1.OutputStream_OUTPUT_STREAM_STDERR
	}
	b.Bus.Publish(e.plan.session.id, termdv1.EventKind_EVENT_KIND_OUTPUT, func(ev *termdv1.Event) {
		ev.Payload = &termdv1.Event_Output{Output: &termdv1.OutputChunk{ExecutionId: e.id, Stream: stream, Offset: at, Data: data}}
	})
}

var finalStates = map[runner.Status]struct {
	plan domain.PlanState
	exec termdv1.ExecutionState
}{
	runner.StatusSucceeded:   {domain.PlanSucceeded, termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED},
	runner.StatusFailed:      {domain.PlanFailed, termdv1.ExecutionState_EXECUTION_STATE_FAILED},
	runner.StatusTimedOut:    {domain.PlanTimedOut, termdv1.ExecutionState_EXECUTION_STATE_TIMED_OUT},
	runner.StatusCancelled:   {domain.PlanCancelled, termdv1.ExecutionState_EXECUTION_STATE_CANCELLED},
	runner.StatusKilled:      {domain.PlanKilled, termdv1.ExecutionState_EXECUTION_STATE_KILLED},
	runner.StatusOutputLimit: {domain.PlanOutputLimit, termdv1.ExecutionState_EXECUTION_STATE_OUTPUT_LIMIT},
}

// finish records the final state: receipt first (durable), then state and events.
func (b *Broker) finish(e *execRec, res runner.Result) {
	for _, s := range []runner.Stream{runner.Stdout, runner.Stderr} {
		if ls := e.out[s]; ls != nil {
			ls.close()
		}
	}
	if e.hub != nil {
		e.hub.proc.Store(nil)
		e.hub.end()
	}
	b.mu.Lock()
	p := e.plan
	detail := ""
	if res.Err != nil {
		detail = "the command could not be started: " + res.Err.Error()
	} else if res.IdleTimedOut {
		detail = fmt.Sprintf("the terminal was idle (no output and no input) for %s and the execution was ended", e.hub.idle)
	} else if res.Status == runner.StatusTimedOut {
		detail = timeoutDetail(e.timeout, b.Policy.Current().Limits().MaxTimeout)
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
	r := b.finalReceipt(p, e, res, detail) // stops the egress proxy: its summary is in r
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
		b.shares.put(stored)
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
	fs, ok := finalStates[res.Status]
	if !ok {
		fs = finalStates[runner.StatusFailed]
	}
	if err != nil {
		b.Log.Error("could not store the receipt; the intent stays open and becomes outcome_unknown at restart", "execution", e.id, "error", err)
		fs.plan, fs.exec = domain.PlanOutcomeUnknown, termdv1.ExecutionState_EXECUTION_STATE_OUTCOME_UNKNOWN
	}
	if err := b.transition(p, fs.plan); err != nil {
		b.Log.Error("finishing an execution", "execution", e.id, "error", err)
	}
	ee := e.e
	ee.State = fs.exec
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
	// The receipt is the durable record of the end; the journal's record of
	// it is written after the mutex is released (journalPlanAfter).
	record := b.journalPlanAfter(p)
	b.endedLocked(e)
	if b.Metrics != nil {
		b.Metrics.ExecutionFinished(string(res.Status), res.Duration, res.Stdout.Total+res.Stderr.Total)
	}
	e.proc = nil // output is now served from the receipt
	s := p.session
	s.dropRunning(e)
	s.touch(b.Now())
	snap := proto.Clone(ee).(*termdv1.Execution)
	if ev := b.Bus.Publish(s.id, termdv1.EventKind_EVENT_KIND_FINISHED, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Execution{Execution: snap} }); ev != nil {
		e.ends = append(e.ends, ev)
	}
	if stored != nil {
		sum := summaryOf(stored)
		if ev := b.Bus.Publish(s.id, termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Receipt{Receipt: sum} }); ev != nil {
			e.ends = append(e.ends, ev)
		}
	}
	if e.closeSessionAfter && !s.busy() {
		b.publishSessionClosed(s)
	}
	close(e.done)
	b.unlock()
	if timed && b.Stages != nil {
		t[stages.Settle] = time.Since(receipted)
		b.Stages.Record(t)
	}
	record()
	b.running.Done()
}

// execLocked finds an execution the caller may see.
func (b *Broker) execLocked(caller *termdv1.Principal, id string) (*execRec, error) {
	if id == "" {
		return nil, errdefs.Invalid("execution_id is empty")
	}
	e, ok := b.execs[id]
	if !ok || !domain.Visible(caller, e.plan.session.owner) {
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
	if err == nil && !domain.OwnerOrOperator(caller, e.plan.session.owner) {
		err = errdefs.Permission("execution %s belongs to %s; only its owner or an operator may %s it", id, e.plan.session.owner.Name, verb)
	}
	if err == nil && (e.finished || e.proc == nil) {
		done := map[string]string{"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[verb]
		err = errdefs.Precondition("execution %s is %s; only a running execution can be %s", id, execWord(e.e.State), done)
	}
	if err != nil {
		b.unlock()
		return nil, err
	}
	proc, p := e.proc, e.plan
	b.unlock()
	var kind termdv1.EventKind
	switch verb {
	case "pause":
		if err := proc.Pause(); err != nil {
			return nil, errdefs.Precondition("pausing execution %s: %v", id, err)
		}
		kind = termdv1.EventKind_EVENT_KIND_PAUSED
	case "resume":
		if err := proc.Resume(); err != nil {
			return nil, errdefs.Precondition("resuming execution %s: %v", id, err)
		}
		kind = termdv1.EventKind_EVENT_KIND_RESUMED
	case "cancel":
		b.mu.Lock()
		e.cancelledBy = caller
		b.unlock()
		if err := proc.Cancel(); err != nil && !errors.Is(err, runner.ErrFinished) && !errors.Is(err, runner.ErrStopping) {
			return nil, errdefs.Precondition("cancelling execution %s: %v", id, err)
		}
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
		b.Bus.Publish(p.session.id, kind, func(ev *termdv1.Event) { ev.Payload = &termdv1.Event_Execution{Execution: snap} })
		p.session.touch(b.Now())
	}
	return proto.Clone(e.e).(*termdv1.Execution), nil
}

func execWord(s termdv1.ExecutionState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "EXECUTION_STATE_"))
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

// ReadOutput reads redacted output by offset, while or after the command runs.
func (b *Broker) ReadOutput(_ context.Context, caller *termdv1.Principal, r *termdv1.ReadOutputRequest) (*termdv1.ReadOutputResponse, error) {
	stream := runner.Stdout
	switch r.Stream {
	case termdv1.OutputStream_OUTPUT_STREAM_UNSPECIFIED, termdv1.OutputStream_OUTPUT_STREAM_STDOUT:
	case termdv1.OutputStream_OUTPUT_STREAM_STDERR:
		stream = runner.Stderr
	default:
		return nil, errdefs.Invalid("stream %v is not stdout or stderr", r.Stream)
	}
	if r.Offset < 0 {
		return nil, errdefs.Invalid("offset %d is negative", r.Offset)
	}
	limit := int(r.Limit)
	if limit <= 0 {
		limit = 64 << 10
	}
	limit = min(limit, 1<<20)
	b.mu.Lock()
	e, err := b.execLocked(caller, r.ExecutionId)
	if err != nil {
		b.unlock()
		// A finished execution whose plan was forgotten: read its receipt.
		past, _, perr := b.pastExecution(caller, r.ExecutionId)
		if perr != nil {
			return nil, perr
		}
		if past == nil {
			return nil, err
		}
		e = &execRec{e: past, finished: true}
		b.mu.Lock()
	}
	proc, receiptID, ee, red := e.proc, e.e.ReceiptId, proto.Clone(e.e).(*termdv1.Execution), e.redactor
	b.unlock()

	var kept []byte
	var total int64
	var done bool
	if proc != nil {
		raw, t, d := proc.ReadOutput(stream, 0, 1<<30)
		// While it runs, the unfinished last line (maybe half a secret) is
		// not served, as the live stream holds it back too.
		if i := bytes.LastIndexByte(raw, '\n'); i >= 0 {
			raw = raw[:i+1]
		} else {
			raw = raw[:max(0, len(raw)-receiptstore.DefaultHold)]
		}
		kept, total, done = []byte(red.Redact(string(raw))), t, d
		done = false // the receipt, not the live buffer, is the final word
	} else if receiptID != "" {
		rc, err := b.Store.Get(receiptID)
		if err != nil {
			return nil, errdefs.Internal("reading the receipt of execution %s: %v", r.ExecutionId, err)
		}
		if stream == runner.Stdout {
			kept, total = []byte(rc.Stdout), rc.StdoutBytes
		} else {
			kept, total = []byte(rc.Stderr), rc.StderrBytes
		}
		done = true
	} else {
		done = e.finished
		if stream == runner.Stdout {
			total = ee.StdoutBytes
		} else {
			total = ee.StderrBytes
		}
	}
	resp := &termdv1.ReadOutputResponse{Offset: r.Offset, KeptBytes: int64(len(kept)), TotalBytes: total}
	resp.Truncated = total > int64(len(kept)) && done
	if r.Offset < int64(len(kept)) {
		end := min(int64(len(kept)), r.Offset+int64(limit))
		resp.Data = kept[r.Offset:end]
	}
	resp.NextOffset = r.Offset + int64(len(resp.Data))
	resp.Eof = done && resp.NextOffset >= int64(len(kept))
	return resp, nil
}

// stall holds termd at point when a test asked for it (Deps.Stall).
func (b *Broker) stall(point string) {
	if b.Stall != nil {
		b.Stall(point)
	}
}
