// Package runner owns the lifecycle of one bounded execution: it starts a
// resolved absolute path with argv (no shell), an environment given by the
// caller and stdin from /dev/null, in its own process group and (where the
// kernel allows) its own cgroup, captures bounded output while hashing every
// byte, pauses, resumes, cancels and times it out, and makes sure nothing the
// execution started outlives it. It knows nothing of policy or transports.
//
// Containment, strongest available first:
//   - cgroup v2 (pure v2 at /sys/fs/cgroup or the unified hierarchy of a hybrid
//     host): the child is cloned straight into its cgroup (clone3 with
//     CLONE_INTO_CGROUP), killed with cgroup.kill, paused with cgroup.freeze;
//     pids/memory limits when v2 has those controllers.
//   - on hybrid hosts, v1 pids/memory cgroups carry the limits v2 cannot; the
//     spawning OS thread enters them just before forking so the child is born
//     inside them.
//   - without cgroups: the process group, plus a /proc scan of the process tree
//     (polled while running, and again at the end until nothing is left), plus
//     the daemon being a child subreaper (EnableSubreaper) so that orphans of an
//     execution are re-parented to us and can still be found.
//
// Spawn failures (exec errors, cgroup creation errors, bad credentials) do not
// make Start return an error: Start returns a Process whose Wait reports
// StatusFailed with Result.Err set, so every attempt has a final state for its
// receipt. Start returns an error only for an invalid Spec (nothing attempted).
package runner

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Stream names one output stream of an execution.
type Stream int

const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("stream(%d)", int(s))
}

// Status is the final state of an execution.
type Status string

const (
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"    // non-zero exit, or spawn failure (Result.Err)
	StatusTimedOut  Status = "timed_out" // our timeout ended it
	StatusCancelled Status = "cancelled" // Cancel ended it
	StatusKilled    Status = "killed"    // a signal we did not send ended it
)

// DefaultOutputCap is the per-stream kept-bytes cap when Spec.OutputCap is 0.
const DefaultOutputCap = 1 << 20

// DefaultGrace is the SIGTERM-to-SIGKILL delay when Spec.Grace is 0.
const DefaultGrace = 2 * time.Second

// Spec is one execution, already decided by policy.
type Spec struct {
	ID   string   // execution id; names the cgroup (see Runner.CgroupPathFor)
	Path string   // resolved absolute path of the binary
	Argv []string // full argv including argv[0]; empty means {Path}
	Dir  string   // working directory ("" = the daemon's)
	Env  []string // the complete environment; empty means empty, never inherited

	Timeout time.Duration // required, > 0; keeps counting while paused
	Grace   time.Duration // SIGTERM to SIGKILL; 0 = DefaultGrace

	OutputCap int64 // bytes kept per stream; 0 = DefaultOutputCap, < 0 = keep none
	MemoryMax int64 // bytes; 0 = no limit
	PidsMax   int64 // tasks; 0 = no limit

	NoNetwork bool // run in a fresh network namespace when permitted
	// RequireNoNetwork makes an unavailable network namespace a spawn failure
	// instead of running with the network (Result.NetNSApplied tells which).
	RequireNoNetwork bool

	Credential *syscall.Credential // nil = run as the daemon's user
	NewHash    func() hash.Hash    // nil = sha256
	// OnOutput receives output as it arrives, in order per stream, from the
	// stream's reader goroutine. chunk is only valid during the call (like
	// io.Writer); the callback must not block for long (it stalls the command).
	OnOutput func(s Stream, offset int64, chunk []byte)
}

// StreamResult summarises one output stream.
type StreamResult struct {
	Kept      []byte // first OutputCap bytes
	Total     int64  // every byte the command wrote
	Digest    string // hex of NewHash over every byte
	Truncated bool   // Total > len(Kept)
}

// Result is the final state of an execution.
type Result struct {
	Status     Status
	ExitCode   int    // -1 when killed by a signal or never started
	Signal     string // e.g. "SIGKILL" when the main process died of a signal
	StartedAt  time.Time
	FinishedAt time.Time
	Duration   time.Duration // monotonic
	Stdout     StreamResult
	Stderr     StreamResult
	Err        error // spawn failure cause (Status is then StatusFailed)

	CgroupUsed   bool
	CgroupPath   string   // v2 cgroup of the execution ("" when none)
	NetNSApplied bool     // ran in its own network namespace
	Limits       []string // limits actually enforced, e.g. "v1:pids.max=64"
	// Leftovers counts processes other than the main one that were still
	// alive when the execution ended and had to be killed.
	Leftovers int
}

// Options configures a Runner beyond New's defaults.
type Options struct {
	// CgroupParent is the v2 directory under which per-execution cgroups are
	// made; "" = <v2 mount><our own cgroup>/termd. On a pure v2 systemd host
	// the daemon's own cgroup holds the daemon, so v2 forbids delegating
	// controllers from it: run the unit with Delegate=yes and either move the
	// daemon into a leaf (e.g. <unit>/daemon) before New, or pass a parent
	// whose ancestors have no processes. Without that, executions still get
	// cgroups (kill, freeze, membership) but no pids/memory limits, and
	// Result.Limits says so by being empty.
	CgroupParent string
	// NoCgroups forces the process-group + /proc + subreaper fallback.
	NoCgroups bool
	// NoV1 skips v1 pids/memory cgroups on hybrid hosts.
	NoV1 bool
}

// Runner starts executions. It is safe for concurrent use.
type Runner struct {
	caps      Capabilities
	parent    string            // abs v2 parent dir, "" = no cgroups
	parentRel string            // parent relative to the v2 mount (as in /proc/PID/cgroup)
	v1Parents map[string]string // controller -> abs parent dir
	v1Rel     map[string]string // controller -> parent relative to its mount
	ownV1     map[string]string // controller -> our own abs v1 cgroup dir
	created   []string          // parent dirs we made (removed by Close)
	self      int
	selfSid   int
	selfPgid  int
	seq       atomic.Uint64

	mu   sync.Mutex
	live map[*Process]struct{}
}

// New makes a Runner with default options; cgroupParent "" = auto.
func New(cgroupParent string) (*Runner, error) {
	return NewWithOptions(Options{CgroupParent: cgroupParent})
}

// NewWithOptions makes a Runner. It creates the cgroup parent directories it
// needs and enables the pids and memory controllers for them where v2 has them.
func NewWithOptions(o Options) (*Runner, error) {
	r := &Runner{
		caps:      Probe(),
		v1Parents: map[string]string{},
		v1Rel:     map[string]string{},
		ownV1:     map[string]string{},
		self:      os.Getpid(),
		live:      map[*Process]struct{}{},
	}
	r.selfSid, _ = unix.Getsid(0)
	r.selfPgid = unix.Getpgrp()
	if o.NoCgroups || r.caps.CgroupV2 == "" {
		return r, nil
	}
	own := ownCgroup("")
	mount := r.caps.CgroupV2
	parent := o.CgroupParent
	if parent == "" {
		parent = filepath.Join(mount, own.v2, "termd")
	}
	parent = filepath.Clean(parent)
	rel, err := filepath.Rel(mount, parent)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("cgroup parent %s is not below the cgroup v2 mount %s", parent, mount)
	}
	if err := r.mkParent(mount, parent); err != nil {
		return nil, err
	}
	r.parent = parent
	r.parentRel = "/" + rel
	if !o.NoV1 {
		for _, ctl := range []string{"pids", "memory"} {
			m := map[string]string{"pids": r.caps.V1Pids, "memory": r.caps.V1Memory}[ctl]
			if m == "" || own.v1[ctl] == "" {
				continue
			}
			ownDir := filepath.Join(m, own.v1[ctl])
			d := filepath.Join(ownDir, filepath.Base(parent))
			if err := r.mkdirTracked(d); err != nil {
				continue // v1 limits are optional
			}
			r.ownV1[ctl] = ownDir
			r.v1Parents[ctl] = d
			r.v1Rel[ctl] = filepath.Join(own.v1[ctl], filepath.Base(parent))
		}
	}
	return r, nil
}

// mkParent creates parent (and missing ancestors) and enables pids/memory in
// each level's subtree_control where available (best effort: a cgroup that has
// processes of its own cannot delegate controllers in v2).
func (r *Runner) mkParent(mount, parent string) error {
	rel, _ := filepath.Rel(mount, parent)
	cur := mount
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		enableControllers(cur)
		cur = filepath.Join(cur, part)
		if err := r.mkdirTracked(cur); err != nil {
			return fmt.Errorf("create cgroup parent: %w", err)
		}
	}
	enableControllers(cur)
	return nil
}

func enableControllers(dir string) {
	for _, c := range readControllers(filepath.Join(dir, "cgroup.controllers")) {
		if c == "pids" || c == "memory" {
			_ = writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c)
		}
	}
}

func (r *Runner) mkdirTracked(d string) error {
	err := os.Mkdir(d, 0o755)
	if err == nil {
		r.created = append(r.created, d)
		return nil
	}
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
}

// Close removes the cgroup parent directories this Runner created, when empty.
func (r *Runner) Close() error {
	var first error
	for i := len(r.created) - 1; i >= 0; i-- {
		if err := os.Remove(r.created[i]); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
	}
	r.created = nil
	return first
}

// Capabilities reports what this Runner found at New.
func (r *Runner) Capabilities() Capabilities { return r.caps }

// CgroupParent is the v2 directory holding per-execution cgroups ("" = none).
func (r *Runner) CgroupParent() string { return r.parent }

// CgroupPathFor is the v2 cgroup an execution with this id will use, so the
// daemon can record it in the intent before the process starts ("" without
// cgroups or for an empty id).
func (r *Runner) CgroupPathFor(id string) string {
	if r.parent == "" || id == "" {
		return ""
	}
	return filepath.Join(r.parent, cgroupName(id))
}

func cgroupName(id string) string {
	var b strings.Builder
	b.WriteString("x-")
	for _, c := range id {
		if len(b.String()) >= 120 {
			break
		}
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ErrFinished is returned by Pause and Resume once the execution has ended.
var ErrFinished = errors.New("execution has finished")

// ErrStopping is returned by Pause once the execution is being ended.
var ErrStopping = errors.New("execution is being stopped")

func (r *Runner) register(p *Process) {
	r.mu.Lock()
	r.live[p] = struct{}{}
	r.mu.Unlock()
}

func (r *Runner) unregister(p *Process) {
	r.mu.Lock()
	delete(r.live, p)
	r.mu.Unlock()
}

func (r *Runner) liveProcesses() []*Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Process, 0, len(r.live))
	for p := range r.live {
		out = append(out, p)
	}
	return out
}

func validate(s *Spec) error {
	if !filepath.IsAbs(s.Path) {
		return fmt.Errorf("path %q is not absolute: resolve it before starting", s.Path)
	}
	if s.Timeout <= 0 {
		return errors.New("timeout must be positive")
	}
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	if s.OutputCap == 0 {
		s.OutputCap = DefaultOutputCap
	} else if s.OutputCap < 0 {
		s.OutputCap = 0
	}
	if s.NewHash == nil {
		s.NewHash = sha256.New
	}
	if len(s.Argv) == 0 {
		s.Argv = []string{s.Path}
	}
	for _, e := range s.Env {
		if !strings.Contains(e, "=") || strings.ContainsRune(e, 0) {
			return fmt.Errorf("environment entry %q is not NAME=value", e)
		}
	}
	return nil
}
