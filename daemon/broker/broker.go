// Package broker is termd's domain core: sessions, plans and their state
// machine, approvals, executions and events. It decides with the policy
// engine, runs with the runner, and records every final state as a signed
// receipt. It knows nothing about gRPC; the server package translates.
package broker

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/termd/termd/daemon/broker/advice"
	"github.com/termd/termd/daemon/broker/bounds"
	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/broker/grants"
	"github.com/termd/termd/daemon/broker/hostfs"
	"github.com/termd/termd/daemon/broker/journal"
	"github.com/termd/termd/daemon/broker/projects"
	"github.com/termd/termd/daemon/broker/receiptq"
	"github.com/termd/termd/daemon/broker/sessions"
	"github.com/termd/termd/daemon/broker/stages"
	"github.com/termd/termd/daemon/broker/terminals"
	"github.com/termd/termd/daemon/broker/wire"
	"github.com/termd/termd/daemon/broker/wsnet"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/events"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/daemon/search"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Adviser is the optional model adviser as the broker sees it.
type Adviser = advice.Adviser

// Deps are the broker's collaborators.
type Deps struct {
	Config func() *config.Config
	Policy *policy.Engine
	Runner *runner.Runner
	// Sandbox is what this host can enforce (sandbox.Probe at start).
	Sandbox  sandbox.Support
	Store    *receiptstore.Store
	Keys     *receiptstore.Keys
	Redactor *receiptstore.Redactor
	// Search is the full-text index over the receipts (nil = no search).
	Search  *search.Index
	Bus     *events.Bus
	Adviser Adviser // nil when turned off
	Log     *slog.Logger
	// Protected are termd's own files (config, policy, keys, state): writes are denied.
	Protected []string
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Metrics observes plans, executions and policy reloads (nil = none; see daemon/metrics).
	Metrics interface {
		PlanDecided(verdict string)
		ExecutionFinished(status string, d time.Duration, outBytes int64)
		PolicyReloaded(ok bool)
	}
	// Stages receives the stage times of each execution that ran (nil =
	// none kept; the daemon gives a stages.Log, served at /debug/stages).
	Stages stages.Recorder
	// Stall is called at the points where a crash matters most, so that a
	// test can hold termd there and kill it (nil = nothing): "spawn" (the
	// launcher is spawned, the intent may not be durable yet), "release"
	// (the intent is durable, the launcher not yet released) and "compact"
	// (the journal's compacted copy is written, not yet renamed). Only
	// termd built with the termdtest tag sets it (daemon/teststall.go).
	Stall func(point string)
}

// Broker owns sessions, plans and executions.
type Broker struct {
	Deps

	mu       sync.Mutex
	sessions sessions.Registry[*execRec] // daemon/broker/sessions
	plans    map[string]*planRec
	execs    map[string]*execRec
	// runningBy counts unfinished executions per requester (principalKey):
	// the cap check at every start scanned all executions held since start.
	runningBy map[string]int
	running   sync.WaitGroup
	closing   bool

	streams   sessions.Streams // open event streams per principal
	journal   *journal.Journal
	receipts  receiptq.Receipts
	recovered map[string]string    // plan id -> outcome_unknown receipt id
	projects  *projects.Projects   // per-workspace policy layers (daemon/broker/projects)
	advice    *advice.Advice       // the adviser glue (daemon/broker/advice)
	grants    *grants.Grants       // remembered approvals (daemon/broker/grants)
	terms     *terminals.Terminals // PTY executions' terminals (daemon/broker/terminals)
	// fs is the host file system part: homes, TMPDIRs, reads as the
	// caller, workspace files, storage budgets (daemon/broker/hostfs).
	fs *hostfs.FS
	// net is the workspace network: loopbacks, port forwards, egress
	// proxies (daemon/broker/wsnet).
	net *wsnet.Net
	// launches builds each execution's runner spec: its sandbox, network,
	// environment and private files (daemon/broker/executions).
	launches *executions.Launches
	// planUse is what each principal's plans hold (daemon/broker/bounds,
	// planbounds.go); settled
	// are the plans settled since the mutex was taken, placed at unlock.
	planUse bounds.Uses
	settled []*planRec
	// linger is how long ExecuteAndWait holds an event for those after it
	// (sessions.Linger; a test sets its own).
	linger time.Duration

	stop chan struct{}
	done chan struct{}
}

// New builds a broker and recovers executions a crash interrupted: each
// intent without a final receipt becomes an outcome_unknown receipt, and any
// process it left behind is killed.
func New(d Deps) (*Broker, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	b := &Broker{
		Deps:      d,
		sessions:  sessions.Registry[*execRec]{},
		plans:     map[string]*planRec{},
		execs:     map[string]*execRec{},
		runningBy: map[string]int{},
		recovered: map[string]string{},
		streams:   sessions.Streams{},
		linger:    sessions.Linger,
		planUse:   bounds.Uses{},
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	b.projects = projects.New(projects.Deps{Config: d.Config, Policy: d.Policy, Log: d.Log, Metrics: d.Metrics})
	b.advice = advice.New(d.Adviser, d.Redactor, adviceHost{b})
	b.grants = grants.New(grantHost{b})
	b.terms = terminals.New(termHost{b})
	b.fs = hostfs.New(hostfs.Deps{Config: d.Config, Log: d.Log, Store: d.Store, Search: d.Search, Redactor: d.Redactor, Protected: b.protectedPaths})
	b.net = wsnet.New(wsnet.Deps{Config: d.Config, Log: d.Log, Bus: d.Bus, NetNS: func() bool { return d.Runner.Capabilities().NetNS },
		WorkspaceOf: b.workspaceOf, Executions: forwardTargets{b}})
	b.launches = executions.NewLaunches(executions.Deps{Config: d.Config, Policy: d.Policy, Sandbox: d.Sandbox, Keys: d.Keys,
		Redactor: d.Redactor, Bus: d.Bus, Files: b.fs, MkdirOwned: hostfs.MkdirOwned})
	b.receipts = receiptq.Receipts{Store: d.Store, Keys: d.Keys, Search: d.Search, Log: d.Log, Now: d.Now, Session: b.sessionVisible}
	if err := b.recover(); err != nil {
		return nil, err
	}
	b.fs.RemoveStaleSpares()
	b.projects.Load()
	if err := b.openJournal(filepath.Join(d.Config().StateDir, "plans.jsonl")); err != nil {
		return nil, err
	}
	go b.sweep()
	return b, nil
}

func (b *Broker) recover() error {
	intents, err := b.Store.RecoverIntents()
	if err != nil {
		return fmt.Errorf("recovering interrupted executions: %w", err)
	}
	for _, in := range intents {
		if in.Pid > 0 && in.PidStart == 0 {
			// Recorded by an older termd (or where start times are not
			// known): the pid may since belong to an unrelated process group.
			b.Log.Warn("an interrupted execution's process has no recorded start time: its process group is not killed by pid (the pid may have been reused), only its cgroup if it had one",
				"execution", in.ExecutionID, "pid", in.Pid, "cgroup", in.CgroupPath)
		}
		if in.Pid > 0 || in.CgroupPath != "" {
			if err := runner.KillLeftoversStrict(in.Pid, in.PidStart, in.CgroupPath); err != nil {
				b.Log.Warn("killing leftovers of an interrupted execution", "execution", in.ExecutionID, "error", err)
			}
		}
		// Its private TMPDIR may hold a credential file (inject: file).
		if in.ExecutionID != "" && filepath.IsLocal(in.ExecutionID) {
			if err := b.fs.RemoveTmp(in.ExecutionID); err != nil {
				b.Log.Warn("removing the TMPDIR of an interrupted execution", "execution", in.ExecutionID, "error", err)
			}
		}
		r := in.OutcomeUnknown(b.Now(), "termd stopped while this command was running; its outcome is unknown")
		stored, err := b.Store.Append(r)
		if err != nil {
			return fmt.Errorf("recording outcome_unknown for execution %s: %w", in.ExecutionID, err)
		}
		b.recovered[in.PlanID] = stored.ID
		b.Log.Warn("interrupted execution recorded as outcome_unknown", "execution", in.ExecutionID, "plan", in.PlanID)
	}
	return nil
}

// sweep expires idle sessions and stale approvals.
func (b *Broker) sweep() {
	defer close(b.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.expire()
			b.maybeCompactJournal()
		}
	}
}

// Shutdown stops accepting work, lets running executions finish for up to
// grace, then cancels the rest and waits for their receipts.
func (b *Broker) Shutdown(grace time.Duration) {
	b.mu.Lock()
	b.closing = true
	b.unlock()
	finished := make(chan struct{})
	go func() { b.running.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(grace):
		b.mu.Lock()
		for _, e := range b.execs {
			if e.proc != nil && !e.finished {
				e.stopReason = "termd is shutting down"
				_ = e.proc.Cancel()
			}
		}
		b.unlock()
		<-finished
	}
	b.fs.CloseTmpSpares()
	b.net.Close()
	close(b.stop)
	<-b.done
	b.mu.Lock()
	b.closeJournal()
	b.journal = nil
	b.unlock()
}

// ActiveExecutions counts executions still running.
func (b *Broker) ActiveExecutions() int {
	b.mu.Lock()
	defer b.unlock()
	n := 0
	for _, e := range b.execs {
		if !e.finished {
			n++
		}
	}
	return n
}

// FillStatus adds the domain part of the daemon status.
func (b *Broker) FillStatus(_ context.Context, caller *termdv1.Principal, st *termdv1.GetStatusResponse) {
	pol := b.Policy.Current()
	st.PolicyVersion = pol.Version()
	st.PolicySource = pol.Name()
	st.DefaultMode = wire.ModeProto(pol.DefaultMode())
	b.mu.Lock()
	st.ActiveSessions += b.sessions.OpenVisible(caller)
	for _, e := range b.execs {
		if !e.finished && domain.Visible(caller, e.plan.session.Owner) {
			st.ActiveExecutions++
		}
	}
	b.unlock()
	if n, err := b.Store.Count(); err == nil {
		st.Receipts = n
	}
	st.ReceiptKeyId = b.Keys.KeyID()
	st.LastGlobalSeq = b.Bus.LastGlobalSeq()
	if b.Adviser != nil {
		st.AdviserAvailable, st.AdviserDetail = b.Adviser.Available()
		if st.AdviserAvailable {
			st.AdviserDetail = ""
		}
	} else {
		st.AdviserDetail = "turned off (adviser.enabled: false)"
	}
	caps := b.Runner.Capabilities()
	st.Capabilities = []*termdv1.Capability{
		{Name: "cgroup_v2", Available: caps.CgroupV2 != "", Detail: caps.CgroupV2},
		{Name: "cgroup_kill", Available: caps.Kill},
		{Name: "cgroup_freeze", Available: caps.Freeze},
		{Name: "network_namespace", Available: caps.NetNS},
		{Name: "subreaper", Available: caps.Subreaper},
		b.launches.Capability(),
		b.net.LoopbackCapability(),
	}
}

// protectedPaths are termd's own files plus the configured ones.
func (b *Broker) protectedPaths() []string {
	cfg := b.Config()
	p := append([]string{cfg.StateDir, cfg.Socket}, b.Protected...)
	// The socket's directory too, unless commands legitimately work there.
	if dir := filepath.Dir(cfg.Socket); !domain.InsideAny(dir, cfg.Workspaces) && !domain.ContainsAny(dir, cfg.Workspaces) {
		p = append(p, dir)
	}
	if cfg.Source != "" {
		p = append(p, cfg.Source)
	}
	if cfg.Policy != "" {
		p = append(p, cfg.Policy)
	}
	p = append(p, cfg.Secrets...)
	p = append(p, b.fs.PrivatePaths()...)
	p = append(p, b.projects.Paths()...)
	if cfg.Adviser.APIKeyFile != "" {
		p = append(p, cfg.Adviser.APIKeyFile)
	}
	return p
}
