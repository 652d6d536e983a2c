//go:build !linux

package runner

// Without Linux there are no cgroups, network namespaces or subreapers: an
// execution is bounded by its own process group only. A child that leaves
// the group (setsid) is not found; doctor and the daemon's status say so.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Capabilities reports the kernel features available for containment.
type Capabilities struct {
	CgroupV2         string
	Hybrid           bool
	Kill, Freeze     bool
	Controllers      []string
	V1Pids, V1Memory string
	NetNS            bool
	Subreaper        bool
	Layout           string   // "none" here
	CgroupMissing    []string // nothing: there are no cgroups to miss
}

// Probe reports that none of the Linux containment features exist here.
func Probe() Capabilities { return Capabilities{Layout: "none"} }

// EnableSubreaper is Linux-only.
func EnableSubreaper() error {
	return errors.New("child subreaper is Linux-only: executions are bounded by their process group")
}

// Runner starts executions bounded by their process group.
type Runner struct {
	mu   sync.Mutex
	live map[*Process]struct{}

	// LeafMove is always "" here (no cgroups).
	LeafMove string
}

// New makes a Runner; cgroupParent is ignored without cgroups.
func New(string) (*Runner, error) { return NewWithOptions(Options{}) }

// NewWithOptions makes a Runner.
func NewWithOptions(Options) (*Runner, error) {
	return &Runner{live: map[*Process]struct{}{}}, nil
}

// Close releases nothing: there are no cgroup directories.
func (r *Runner) Close() error { return nil }

// Capabilities reports what is available (nothing beyond process groups).
func (r *Runner) Capabilities() Capabilities { return Capabilities{} }

// CgroupParent is always "" here.
func (r *Runner) CgroupParent() string { return "" }

// ReserveCgroup is always "" here.
func (r *Runner) ReserveCgroup(string) string { return "" }

// Reserve is always "" here.
func (r *Runner) Reserve(Spec) string { return "" }

// Process is one running execution.
type Process struct {
	r      *Runner
	spec   Spec
	cmd    *exec.Cmd
	pid    int
	ident  uint64 // pid's start time (procStart)
	out    [3]*capture
	done   chan struct{}
	res    Result
	start  time.Time
	mono   time.Time
	mu     sync.Mutex
	paused bool
	reason Status
}

// Start spawns the command in its own process group. Only an invalid Spec is
// an error; a spawn failure is a Process whose Wait reports failed.
func (r *Runner) Start(spec Spec) (*Process, error) {
	if err := validate(&spec); err != nil {
		return nil, err
	}
	p := &Process{r: r, spec: spec, done: make(chan struct{}), start: time.Now()}
	p.mono = p.start
	ob := &budget{max: spec.OutputBudget, over: func() { p.stop(StatusOutputLimit) }}
	for _, s := range []Stream{Stdout, Stderr} {
		p.out[s] = newCapture(s, spec.OutputCap, spec.NewHash(), spec.OnOutput, ob)
		p.out[s].tail = spec.KeepTail
	}
	if spec.TTY != nil {
		return p.failed(errors.New("pseudo-terminal executions need Linux")), nil
	}
	cmd := &exec.Cmd{Path: spec.Path, Args: spec.Argv, Dir: spec.Dir, Env: append([]string{}, spec.Env...)}
	if l := spec.Launch; l != nil {
		// sandbox-exec -p PROFILE PATH ARGS...: argv[0] becomes the path.
		cmd.Path = l.Path
		cmd.Args = append(append([]string{l.Path}, l.Prefix...), spec.Path)
		cmd.Args = append(cmd.Args, spec.Argv[1:]...)
		l.Close()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: spec.Credential}
	if spec.Stdin != nil {
		cmd.Stdin = spec.Stdin // an *os.File: the child gets the descriptor itself
	}
	if spec.BeforeRelease != nil {
		if err := spec.BeforeRelease(); err != nil {
			return p.failed(err), nil
		}
	}
	stdout, err1 := cmd.StdoutPipe()
	stderr, err2 := cmd.StderrPipe()
	if err := errors.Join(err1, err2); err != nil {
		return p.failed(err), nil
	}
	if err := cmd.Start(); err != nil {
		return p.failed(err), nil
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	p.ident = procStart(p.pid)
	r.mu.Lock()
	r.live[p] = struct{}{}
	r.mu.Unlock()
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.out[Stdout].pump(stdout) }()
	go func() { defer readers.Done(); p.out[Stderr].pump(stderr) }()
	go p.supervise(&readers)
	return p, nil
}

func (p *Process) failed(err error) *Process {
	now := time.Now()
	p.res = Result{Status: StatusFailed, ExitCode: -1, StartedAt: p.start, FinishedAt: now, Err: err,
		Stdout: p.out[Stdout].finishEmpty(), Stderr: p.out[Stderr].finishEmpty()}
	close(p.done)
	return p
}

func (p *Process) supervise(readers *sync.WaitGroup) {
	timer := time.AfterFunc(p.spec.Timeout, func() { p.stop(StatusTimedOut) })
	err := p.cmd.Wait()
	exitedAt := time.Now()
	timer.Stop()
	_ = unix.Kill(-p.pid, syscall.SIGKILL) // nothing of the group outlives the main process
	readers.Wait()
	res := Result{StartedAt: p.start, ExitedAt: exitedAt, FinishedAt: time.Now(), Duration: time.Since(p.mono), ExitCode: -1,
		Stdout: p.out[Stdout].result(), Stderr: p.out[Stderr].result()}
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	p.mu.Lock()
	reason := p.reason
	p.mu.Unlock()
	switch {
	case reason != "":
		res.Status = reason
		if ws.Signaled() {
			res.Signal = unix.SignalName(ws.Signal())
		} else {
			res.ExitCode = ws.ExitStatus()
		}
	case ws.Signaled():
		res.Status, res.Signal = StatusKilled, unix.SignalName(ws.Signal())
	case err == nil:
		res.Status, res.ExitCode = StatusSucceeded, 0
	default:
		res.Status, res.ExitCode = StatusFailed, ws.ExitStatus()
	}
	p.res = res
	p.r.mu.Lock()
	delete(p.r.live, p)
	p.r.mu.Unlock()
	close(p.done)
}

// stop ends the group: SIGTERM, the grace period, then SIGKILL.
func (p *Process) stop(reason Status) bool {
	p.mu.Lock()
	if p.reason != "" {
		p.mu.Unlock()
		return false
	}
	p.reason = reason
	p.mu.Unlock()
	_ = unix.Kill(-p.pid, syscall.SIGTERM)
	_ = unix.Kill(-p.pid, syscall.SIGCONT)
	go func() {
		select {
		case <-p.done:
		case <-time.After(p.spec.Grace):
			_ = unix.Kill(-p.pid, syscall.SIGKILL)
		}
	}()
	return true
}

// Delivered says the execution's result has been delivered; without spawn
// pools there is nothing to refill.
func (p *Process) Delivered() {}

// PoolStatus: there are no spawn pools here.
func (r *Runner) PoolStatus() string { return "no spawn pools" }

// Pid is the main process id.
func (p *Process) Pid() int { return p.pid }

// Identity is (pid, start time: procStart) for KillLeftoversStrict.
func (p *Process) Identity() (int, uint64) { return p.pid, p.ident }

// CgroupPath is always "" here.
func (p *Process) CgroupPath() string { return "" }

// Done is closed when the execution has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait returns the final result.
func (p *Process) Wait() Result { <-p.done; return p.res }

// ReadOutput reads kept output by offset.
func (p *Process) ReadOutput(s Stream, offset int64, limit int) ([]byte, int64, bool) {
	if s != Stdout && s != Stderr {
		return nil, 0, true
	}
	return p.out[s].read(offset, limit)
}

// Paused says whether the group is stopped.
func (p *Process) Paused() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.paused }

// Pause stops the whole process group (SIGSTOP).
func (p *Process) Pause() error { return p.signalPaused(true) }

// Resume continues the process group (SIGCONT).
func (p *Process) Resume() error { return p.signalPaused(false) }

func (p *Process) signalPaused(on bool) error {
	select {
	case <-p.done:
		return ErrFinished
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason != "" {
		return ErrStopping
	}
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	if err := unix.Kill(-p.pid, sig); err != nil {
		return fmt.Errorf("signalling process group %d: %w", p.pid, err)
	}
	p.paused = on
	return nil
}

// Cancel ends the execution (paused or running).
func (p *Process) Cancel() error {
	select {
	case <-p.done:
		return ErrFinished
	default:
	}
	if !p.stop(StatusCancelled) {
		return ErrStopping
	}
	return nil
}

// IsExecutionProcess says whether pid belongs to a live execution's process group.
func (r *Runner) IsExecutionProcess(pid int) bool {
	pg, err := unix.Getpgid(pid)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.live {
		if p.pid == pg {
			return true
		}
	}
	return false
}

// KillLeftoversStrict kills the process group an interrupted execution led,
// if pid still leads it and still has the start time start (Identity); with
// start 0 (not known on this platform, or not recorded) nothing is killed:
// after pid reuse the group may be an unrelated one.
func KillLeftoversStrict(pid int, start uint64, _ string) error {
	if pg, err := unix.Getpgid(pid); pid <= 1 || start == 0 || procStart(pid) != start || err != nil || pg != pid {
		return nil
	}
	if err := unix.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// WriteTerminal: terminals need Linux here.
func (p *Process) WriteTerminal([]byte) error { return ErrNoTerminal }

// ResizeTerminal: terminals need Linux here.
func (p *Process) ResizeTerminal(rows, cols uint16) error { return ErrNoTerminal }

// Terminal: terminals need Linux here.
func (p *Process) Terminal() *os.File { return nil }
