package executions

import (
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/daemon/sandbox/launcher"
	"github.com/termd/termd/internal/pathmemo"
	"github.com/termd/termd/internal/safefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Setup is what one execution was given to start with: what confines it
// (its launcher, sandbox record, private TMPDIR) and what it received
// (credentials, git identity, stdin). The broker holds one per execution;
// Launches.Spec fills it before the spawn and nothing changes it after,
// until Release.
type Setup struct {
	// Redactor redacts everything the execution produces: termd's
	// redactor plus the values (and encoded forms) of the credentials it
	// received.
	Redactor *receiptstore.Redactor
	// Credentials are the names of the credentials it received.
	Credentials []string
	// GitIdentity is the git identity termd supplied (nil: the request set
	// its own).
	GitIdentity *receipt.GitIdentity
	// Timeout is the command's time limit.
	Timeout time.Duration
	// Stdin is the command's standard input (its plan's), until Spec opens
	// it for the command; nil: /dev/null.
	Stdin []byte
	// Out holds the live, redacted output offsets; owned by the reader
	// goroutines.
	Out [3]*LiveStream
	// Launch confines the command (nil: no sandbox); Sandbox is what the
	// receipt records of it; Tmp is its private TMPDIR, removed at the end.
	Launch  *launcher.Launch
	Sandbox *sandbox.Record
	Tmp     string
}

// Start is one execution as Spec sees it: its names, its requester, and
// the broker's hooks for what Spec does not own.
type Start struct {
	ID, PlanID, SessionID string
	Requester             *termdv1.Principal
	// KeepTail: only a tail of its output is stored (over a storage budget).
	KeepTail bool
	// Term is the TERM it gets.
	Term string
	// Network joins the execution's network (a workspace loopback, the
	// egress proxy), before its HOME and sandbox are made.
	Network func() (Network, error)
	// Terminal gives a PTY execution its terminal (called when the
	// decision has one).
	Terminal func() *runner.TTY
	// Feed gets each chunk of output before its live stream (nil: none).
	Feed func(off int64, chunk []byte)
	// Paths is the execution's memo of the file system's answers (its
	// policy re-check's), which its sandbox shares (nil: the sandbox keeps
	// its own).
	Paths pathmemo.Memo
}

// Network is an execution's network as the broker joined it.
type Network struct {
	// Loopback: it joins its workspace loopback's namespace.
	Loopback bool
	// Egress: it runs behind an egress proxy, in the proxy's namespace;
	// EgressEnv is the proxy's environment.
	Egress    bool
	EgressEnv map[string]string
	// NSFD is the namespace it joins (-1: none).
	NSFD int
	// Fallback says why it runs with no network instead ("" when it does not).
	Fallback string
}

// Files is the host file system (daemon/broker/hostfs) as a launch uses it.
type Files interface {
	HomeFor(uid, gid int) (string, error)
	PrivateTmp(id string, uid, gid int) (string, error)
	RemoveTmp(name string) error
	PrivatePaths() []string
	Base() string
	LinkShared(dir, name, body string, uid int) error
}

// Deps are what Launches needs of the daemon.
type Deps struct {
	Config   func() *config.Config
	Policy   *policy.Engine
	Sandbox  sandbox.Support
	Keys     *receiptstore.Keys
	Redactor *receiptstore.Redactor
	Bus      *events.Bus
	Files    Files
	// MkdirOwned makes rel under home as uid:gid (hostfs.MkdirOwned).
	MkdirOwned func(home, rel string, uid, gid int) error
}

// Launches builds the runner's description of each execution from its
// fresh decision.
type Launches struct {
	Deps
	hidden atomic.Pointer[hiddenCache] // hiddenPaths' last config's
}

// NewLaunches returns the executions' launch preparation.
func NewLaunches(d Deps) *Launches { return &Launches{Deps: d} }

// Spec builds the bounded process description from a fresh decision,
// filling s.
func (l *Launches) Spec(s *Setup, d policy.Decision, in Start) (runner.Spec, error) {
	pol := l.Policy.Current()
	cfg := l.Config()
	rr := cfg.RunAsRequester
	cred, uid, gid, err := RunAs(d.RunAs, in.Requester.GetUid(), rr == nil || *rr)
	if err != nil {
		return runner.Spec{}, err
	}
	nw, home, err := l.isolate(s, d, in, uid, gid)
	if err != nil {
		return runner.Spec{}, err
	}
	env := l.environment(s, d, in, nw, pol.TrustedPath(), home, uid)
	stdinFile, err := l.privateFiles(s, d, env, in.Requester, uid, gid)
	if err != nil {
		return runner.Spec{}, err
	}
	lim := pol.Limits()
	argv := d.ExecArgv
	if len(argv) == 0 {
		argv = d.Argv
	}
	s.Timeout = d.Timeout
	if s.Timeout <= 0 {
		s.Timeout = lim.DefaultTimeout
	}
	for _, st := range []runner.Stream{runner.Stdout, runner.Stderr} {
		s.Out[st] = NewLiveStream(s.Redactor, func(at int64, data []byte) { l.publishOutput(in, st, at, data) })
	}
	outputCap := lim.OutputBytes
	if in.KeepTail {
		outputCap = min(outputCap, cfg.Storage.TailBytes)
	}
	var tty *runner.TTY
	if d.TTY != nil {
		tty = in.Terminal()
	}
	return runner.Spec{
		ID:           in.ID,
		KeepTail:     in.KeepTail,
		Path:         d.ResolvedPath,
		Argv:         argv,
		Dir:          d.Cwd,
		Env:          EnvList(env),
		Timeout:      s.Timeout,
		Grace:        lim.Grace,
		OutputCap:    outputCap,
		OutputBudget: lim.OutputBudget,
		MemoryMax:    lim.MemoryBytes,
		PidsMax:      lim.Pids,
		NoNetwork:    !d.Sandbox.Network && !nw.Loopback,
		JoinNetNS:    nw.Loopback || nw.Egress,
		NetNSFD:      nw.NSFD,
		Credential:   cred,
		Launch:       s.Launch,
		NewHash:      l.Keys.NewDigest,
		TTY:          tty,
		Stdin:        stdinFile,
		OnOutput: func(st runner.Stream, off int64, chunk []byte) {
			if in.Feed != nil {
				in.Feed(off, chunk)
			}
			s.Out[st].Write(chunk)
		},
	}, nil
}

// isolate gives the execution its network (in.Network), its HOME and its
// sandbox with its private TMPDIR (s.Tmp); it returns the network and the
// HOME.
func (l *Launches) isolate(s *Setup, d policy.Decision, in Start, uid, gid int) (Network, string, error) {
	nw, err := in.Network()
	if err != nil {
		return nw, "", err
	}
	home, err := l.Files.HomeFor(uid, gid)
	if err != nil {
		return nw, "", errdefs.Internal("preparing HOME for the command: %v", err)
	}
	rec, tmp, err := l.sandboxFor(s, d, in, nw, home, uid, gid)
	if err != nil {
		return nw, "", err
	}
	s.Sandbox, s.Tmp = rec, tmp
	return nw, home, nil
}

// environment is the command's environment: the request's and the
// policy's, then what termd always sets (PATH: the policy's trusted path),
// then the egress proxy's.
func (l *Launches) environment(s *Setup, d policy.Decision, in Start, nw Network, path []string, home string, uid int) map[string]string {
	env := map[string]string{}
	for k, v := range d.Env {
		env[k] = v
	}
	for k, v := range d.ExecEnv {
		env[k] = v
	}
	fixed := map[string]string{
		"PATH":             JoinPath(path),
		"HOME":             home,
		"LANG":             "C.UTF-8",
		"TERM":             in.Term,
		"NO_COLOR":         "1",
		"PAGER":            "cat",
		"GIT_PAGER":        "cat",
		"TERMD_SESSION_ID": in.SessionID,
		"TERMD_PLAN_ID":    in.PlanID,
		"TERMD_EXECUTION":  in.ID,
		"TMPDIR":           s.Tmp,
	}
	if a, err := config.LookupUID(uint32(uid)); err == nil {
		fixed["USER"], fixed["LOGNAME"] = a.User.Username, a.User.Username
	}
	for k, v := range fixed {
		env[k] = v
	}
	if nw.Egress {
		for k, v := range nw.EgressEnv {
			env[k] = v
		}
	}
	return env
}

// privateFiles puts in the private TMPDIR what the command receives there
// (its git identity, its credentials, its stdin), naming them in env, and
// redacts the credentials' values from its output; it returns the stdin
// (nil: /dev/null).
func (l *Launches) privateFiles(s *Setup, d policy.Decision, env map[string]string, requester *termdv1.Principal, uid, gid int) (*os.File, error) {
	var err error
	if s.GitIdentity, err = SupplyGitIdentity(l.Config(), env, s.Tmp, requester, uid, gid, l.Files.LinkShared); err != nil {
		return nil, err
	}
	if len(d.Credentials) > 0 {
		values, err := InjectCredentials(l.Config(), d, env, s.Tmp, uid, gid)
		if err != nil {
			return nil, err
		}
		var forms []string
		for _, v := range values {
			forms = append(forms, RedactionForms(v)...)
		}
		s.Redactor, s.Credentials = l.Redactor.With(forms...), slices.Clone(d.Credentials)
	}
	return l.stdinFile(s, d, uid, gid)
}

// stdinFile opens the command's standard input: the plan's stdin, checked
// to be what was planned, in a file of its private TMPDIR (StdinFile).
// nil: the plan has none (the runner gives /dev/null).
func (l *Launches) stdinFile(s *Setup, d policy.Decision, uid, gid int) (*os.File, error) {
	if d.Stdin == nil {
		return nil, nil
	}
	data := s.Stdin
	s.Stdin = nil
	if int64(len(data)) != d.Stdin.Bytes || l.Keys.Digest(data) != d.Stdin.SHA256 {
		return nil, errdefs.Precondition("the plan's stdin (%s) is no longer held by termd; plan the command again with its input", domain.BytesWord(d.Stdin.Bytes))
	}
	return StdinFile(data, s.Tmp, uid, gid)
}

// publishOutput sends one coalesced piece of an execution's output as an event.
func (l *Launches) publishOutput(in Start, s runner.Stream, at int64, data []byte) {
	stream := termdv1.OutputStream_OUTPUT_STREAM_STDOUT
	if s == runner.Stderr {
		stream = termdv1.OutputStream_OUTPUT_STREAM_STDERR
	}
	l.Bus.Publish(in.SessionID, termdv1.EventKind_EVENT_KIND_OUTPUT, func(ev *termdv1.Event) {
		ev.Payload = &termdv1.Event_Output{Output: &termdv1.OutputChunk{ExecutionId: in.ID, Stream: stream, Offset: at, Data: data}}
	})
}

// RemoveTmp removes the execution's private temporary directory
// (everything the command left in it).
func (s *Setup) RemoveTmp() {
	if s.Tmp == "" {
		return
	}
	// The command's user's tree: removed through descriptors, following no
	// link it left there.
	if d, err := safefs.Open(filepath.Dir(s.Tmp), os.Geteuid()); err == nil {
		_ = d.RemoveAll(filepath.Base(s.Tmp))
		d.Close()
	}
	s.Tmp = ""
}
