package wire

import (
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// RequestContext is what the daemon adds to an API request to make the
// policy's canonical input of it (Request).
type RequestContext struct {
	Caller      *termdv1.Principal
	DefaultMode policy.Mode // the policy's default mode
	// Workspaces are the workspace roots: a relative cwd is in the first.
	Workspaces []string
	// MaxRequestBytes and MaxStdinBytes are plans.max_request_bytes and
	// plans.max_stdin_bytes.
	MaxRequestBytes, MaxStdinBytes int
	// Digest is the receipts' keyed digest (receiptstore.Keys.Digest).
	Digest func([]byte) string
}

// Request turns the API request into the policy's canonical input.
func Request(r *termdv1.CommandRequest, c RequestContext) (policy.Request, error) {
	if r == nil {
		return policy.Request{}, errdefs.Invalid("request is empty; send argv (a list) or command (a string)")
	}
	if len(r.Argv) > 0 && r.Command != "" {
		return policy.Request{}, errdefs.Invalid("send either argv or command, not both")
	}
	if len(r.Argv) == 0 && strings.TrimSpace(r.Command) == "" {
		return policy.Request{}, errdefs.Invalid("nothing to run: send argv (a list, e.g. [\"ls\", \"-la\"]) or command (a string)")
	}
	if n, max := RequestBytes(r), c.MaxRequestBytes; n > max {
		// Refused before anything is decided or journalled: a plan, its
		// receipt and the journal each keep copies of the request.
		return policy.Request{}, errdefs.Invalid("the request is %s; termd accepts at most %s of argv, command, cwd and env together (plans.max_request_bytes, %d): put long input in a file in the workspace and pass its name", domain.BytesWord(int64(n)), domain.BytesWord(int64(max)), max)
	}
	stdin, err := stdinOf(r, c)
	if err != nil {
		return policy.Request{}, err
	}
	mode := c.DefaultMode
	if r.Mode != termdv1.Mode_MODE_UNSPECIFIED {
		m, err := ModeFromProto(r.Mode)
		if err != nil {
			return policy.Request{}, err
		}
		// Only operators may ask for a mode less strict than the policy's default.
		if m.MorePermissiveThan(mode) && !domain.IsOperator(c.Caller) {
			return policy.Request{}, errdefs.Permission("mode %s is less strict than the policy's default (%s); only operators may request it", m, mode)
		}
		mode = m
	}
	cwd := r.Cwd
	if cwd == "" {
		cwd = c.Workspaces[0]
	} else if !filepath.IsAbs(cwd) {
		// Agents think in project paths ("src"): relative to the first
		// workspace root. The policy still checks where it resolves to.
		cwd = filepath.Join(c.Workspaces[0], cwd)
	}
	return policy.Request{
		Argv:    slices.Clone(r.Argv),
		Command: r.Command,
		Cwd:     cwd,
		Env:     r.Env,
		Mode:    mode,
		Timeout: time.Duration(r.TimeoutSeconds) * time.Second,
		Sandbox: r.Sandbox,
		TTY:     TerminalRequest(r.Tty),
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
func stdinOf(r *termdv1.CommandRequest, c RequestContext) (*policy.Stdin, error) {
	if len(r.Stdin) == 0 {
		return nil, nil
	}
	if max := c.MaxStdinBytes; len(r.Stdin) > max {
		if max == 0 {
			return nil, errdefs.Invalid("stdin is refused here (plans.max_stdin_bytes is 0): put the input in a file in the workspace and pass its name")
		}
		return nil, errdefs.Invalid("stdin is %s; termd accepts at most %s of stdin per plan (plans.max_stdin_bytes, %d): put larger input in a file in the workspace and pass its name", domain.BytesWord(int64(len(r.Stdin))), domain.BytesWord(int64(max)), max)
	}
	if r.Tty != nil {
		return nil, errdefs.Invalid("stdin cannot be given to a terminal (tty) plan: its input is what is typed into it (`termctl send`, `termctl attach`); drop the tty or the stdin")
	}
	return &policy.Stdin{Bytes: int64(len(r.Stdin)), SHA256: c.Digest(r.Stdin)}, nil
}

// HeldBytes is what a plan of r holds: its request and its stdin.
func HeldBytes(r *termdv1.CommandRequest) int64 { return int64(RequestBytes(r) + len(r.Stdin)) }

// RequestBytes is the size of a request's argv, command, cwd, env and
// credential names (plans.max_request_bytes); not its stdin.
func RequestBytes(r *termdv1.CommandRequest) int {
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

// TerminalRequest is the policy's form of a requested terminal.
func TerminalRequest(t *termdv1.TerminalOptions) *policy.Terminal {
	if t == nil {
		return nil
	}
	return &policy.Terminal{Rows: clampSide(t.Rows), Cols: clampSide(t.Cols), Idle: time.Duration(t.IdleTimeoutSeconds) * time.Second}
}

// clampSide keeps a side in uint16 (the policy refuses what is too large).
func clampSide(n uint32) uint16 { return uint16(min(n, 65535)) }

// PolicyProto describes a policy for GetPolicy.
func PolicyProto(p *policy.Policy) *termdv1.GetPolicyResponse {
	lim := p.Limits()
	return &termdv1.GetPolicyResponse{
		Version:                  p.Version(),
		Source:                   p.Name(),
		Text:                     string(p.Canonical()),
		DefaultMode:              ModeProto(p.DefaultMode()),
		NetworkAllowed:           p.NetworkAllowed(),
		TrustedPath:              p.TrustedPath(),
		EnvAllowlist:             p.EnvAllowlist(),
		SandboxedWorkspaceWrites: p.SandboxedWorkspaceWrites(),
		Limits: &termdv1.Limits{
			TimeoutSeconds: uint32(lim.DefaultTimeout / time.Second),
			OutputBytes:    lim.OutputBytes,
			MemoryBytes:    lim.MemoryBytes,
			Pids:           lim.Pids,
			GraceSeconds:   uint32(lim.Grace / time.Second),
		},
	}
}

// Replan is the request a replan of plan id decides for caller: the plan's
// request r with its stdin back (held: what the plan still holds, nil once
// it let go of it), in no mode the caller could not ask for (an agent
// replanning an operator's trusted plan is decided in the policy's default
// mode def). r is copied before it changes.
func Replan(caller *termdv1.Principal, id string, req policy.Request, r *termdv1.CommandRequest, held []byte, def policy.Mode) (policy.Request, *termdv1.CommandRequest, error) {
	if req.Stdin != nil {
		if held == nil {
			return req, nil, errdefs.Precondition("plan %s read %s of stdin, which termd holds only until a plan runs, expires or is denied: plan the command again with its input", id, domain.BytesWord(req.Stdin.Bytes))
		}
		r = proto.Clone(r).(*termdv1.CommandRequest)
		r.Stdin = held
	}
	if req.Mode.MorePermissiveThan(def) && !domain.IsOperator(caller) {
		req.Mode = def
		r = proto.Clone(r).(*termdv1.CommandRequest)
		r.Mode = ModeProto(def)
	}
	return req, r, nil
}
