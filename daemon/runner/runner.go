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
// Spawn pools (Linux): network namespaces and cgroups are made ahead in the
// background and each given to one execution (package pool); an empty
// pool means the spawn makes its own.
//
// Its parts live in subpackages it imports: cgroup (the host's cgroups, the
// runner's parent tree and one execution's cgroups), pool (the spawn pools
// and their refill gate) and proctree (processes read from /proc); none of
// them imports daemon/runner. Of the rest of termd it imports only
// daemon/sandbox/launcher (the launcher's configuration and protocol).
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
	"syscall"
	"time"

	"github.com/termd/termd/daemon/sandbox/launcher"
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
	// StatusOutputLimit: the command wrote more than Spec.OutputBudget and was ended.
	StatusOutputLimit Status = "output_limit"
)

// DefaultOutputCap is the per-stream kept-bytes cap when Spec.OutputCap is 0.
const DefaultOutputCap = 1 << 20

// DefaultGrace is the SIGTERM-to-SIGKILL delay when Spec.Grace is 0.
const DefaultGrace = 2 * time.Second

// Spec is one execution, already decided by policy.
type Spec struct {
	ID   string   // execution id; names the cgroup (see Runner.ReserveCgroup)
	Path string   // resolved absolute path of the binary
	Argv []string // full argv including argv[0]; empty means {Path}
	Dir  string   // working directory ("" = the daemon's)
	Env  []string // the complete environment; empty means empty, never inherited

	Timeout time.Duration // required, > 0; keeps counting while paused
	Grace   time.Duration // SIGTERM to SIGKILL; 0 = DefaultGrace

	OutputCap int64 // bytes kept per stream; 0 = DefaultOutputCap, < 0 = keep none
	// KeepTail keeps the last OutputCap bytes of each stream instead of the
	// first (storage over budget: a small tail; counted and hashed in full).
	KeepTail bool
	// OutputBudget is the total output (both streams) the command may write;
	// past it the execution is ended like a cancel, with StatusOutputLimit.
	// 0 = unlimited.
	OutputBudget int64
	MemoryMax    int64 // bytes; 0 = no limit
	PidsMax      int64 // tasks; 0 = no limit

	NoNetwork bool // run in a fresh network namespace when permitted
	// RequireNoNetwork makes an unavailable network namespace a spawn failure
	// instead of running with the network (Result.NetNSApplied tells which).
	RequireNoNetwork bool
	// JoinNetNS: the command is born in the network namespace NetNSFD (a
	// workspace loopback's) instead of a fresh one: the spawning thread
	// enters it before the fork, or a pre-started launcher joins it before
	// anything else. The runner uses its own duplicate; the caller keeps
	// NetNSFD. Failing to join fails the spawn (it never falls back).
	JoinNetNS bool
	NetNSFD   int

	Credential *syscall.Credential // nil = run as the daemon's user
	// Launch, when set, starts the command through the confining launcher
	// (package sandbox): the launcher is spawned as the daemon's user with
	// the descriptors and namespaces Launch names, receives the command and
	// Credential on a pipe, confines itself and execs the command. A
	// launcher that cannot confine reports why and is a spawn failure.
	Launch *launcher.Launch
	// BeforeRelease, when set, is called once before the command can run:
	// with a launcher, after the launcher has been spawned and waits for its
	// configuration (so the launcher's start overlaps with whatever
	// BeforeRelease waits for, e.g. a durable intent); without one, before
	// the spawn. An error is a spawn failure with that error, and nothing of
	// the command runs. It is not called when the spawn fails first.
	BeforeRelease func() error
	NewHash       func() hash.Hash // nil = sha256
	// TTY, when set, runs the command on a pseudo-terminal (pty_linux.go):
	// stdin, stdout and stderr are its slave, the command leads its own
	// session with the terminal as its controlling tty, and everything it
	// writes is one stream (Stdout). Nil: stdin from /dev/null, two pipes.
	TTY *TTY
	// Stdin, when set, is the command's standard input (a file the caller
	// opened; the caller closes it once Start returned); nil: /dev/null.
	// Not with TTY, whose slave is the input.
	Stdin *os.File
	// OnOutput receives output as it arrives, in order per stream, from the
	// stream's reader goroutine. chunk is only valid during the call (like
	// io.Writer); the callback must not block for long (it stalls the command).
	OnOutput func(s Stream, offset int64, chunk []byte)
}

// StreamResult summarises one output stream.
type StreamResult struct {
	Kept      []byte // first (or, with KeepTail, last) OutputCap bytes
	Total     int64  // every byte the command wrote
	Digest    string // hex of NewHash over every byte
	Truncated bool   // Total > len(Kept)
}

// Result is the final state of an execution.
type Result struct {
	Status    Status
	ExitCode  int    // -1 when killed by a signal or never started
	Signal    string // e.g. "SIGKILL" when the main process died of a signal
	StartedAt time.Time
	// ExitedAt is when the main process's exit was seen (zero after a
	// spawn failure); FinishedAt is when the result was final: everything
	// the execution started was gone and its output read to the end.
	ExitedAt   time.Time
	FinishedAt time.Time
	Duration   time.Duration // monotonic
	Stdout     StreamResult
	Stderr     StreamResult
	Err        error // spawn failure cause (Status is then StatusFailed)

	CgroupUsed   bool
	CgroupPath   string   // v2 cgroup of the execution ("" when none)
	NetNSApplied bool     // ran in its own network namespace
	Limits       []string // limits actually enforced, e.g. "v1:pids.max=64"
	// IdleTimedOut: a PTY execution ended by TTY.Idle (Status is
	// StatusTimedOut).
	IdleTimedOut bool
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
	// NoPool turns off the spawn pools (Linux: network namespaces and
	// cgroups made ahead in the background); every execution then creates
	// its own at spawn, as when a pool is empty. termd sets it from
	// TERMD_SPAWN_POOL=0.
	NoPool bool
	// NoCgroupReuse removes every execution's cgroup at its end instead
	// of handing it back to the pool to serve the next one (see
	// pool.Cgroups.Recycle). termd sets it from TERMD_CGROUP_REUSE=0.
	NoCgroupReuse bool
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

// TTY asks for a pseudo-terminal.
type TTY struct {
	Rows, Cols uint16
	// Idle ends the execution (StatusTimedOut, Result.IdleTimedOut) after
	// this long with no output and no input; 0 = no idle limit.
	Idle time.Duration
}

// ErrFinished is returned by Pause and Resume once the execution has ended.
var ErrFinished = errors.New("execution has finished")

// ErrStopping is returned by Pause once the execution is being ended.
var ErrStopping = errors.New("execution is being stopped")

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
	if s.Stdin != nil && s.TTY != nil {
		return errors.New("a terminal execution reads its terminal: it takes no Stdin")
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
