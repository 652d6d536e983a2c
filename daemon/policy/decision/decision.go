// Package decision holds the policy's data: the Request a caller makes,
// the Context the daemon adds (workspaces, protected paths, sandbox
// support, credentials), and the Decision with its steps, limits, terminal
// and sandbox profile. Plain Go types with JSON tags (the canonical
// request is built from them); it imports only verdict, domain (the
// sandbox profile), internal/policyjson (the explain Step) and
// internal/pathmemo (the context's memo of the file system).
package decision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/pathmemo"
	"github.com/termd/termd/internal/policyjson"
)

// Request is what a caller asks to run.
type Request struct {
	Argv    []string          // canonical form; exactly one of Argv / Command
	Command string            // string form, split without expansion
	Cwd     string            // absolute working directory
	Env     map[string]string // additions requested by the caller
	Mode    verdict.Mode      // "" = policy default
	Timeout time.Duration     // 0 = policy default; > policy max is denied
	// Sandbox is the profile the caller asks for: "" (the policy's
	// choice), SandboxReadOnly or SandboxWorkspaceWrite.
	Sandbox string
	// TTY asks for a pseudo-terminal (terminal.go); nil: none.
	TTY *Terminal
	// Credentials names the credentials the command receives
	// (credentials.go); their values never reach the policy.
	Credentials []string
	// Privileged asks to run as real host root (no user namespace): the
	// decision then asks, whatever the mode (invariant 12).
	Privileged bool
	// Network is the network asked for (netmode.Parse): "" lets the policy
	// choose.
	Network string
	// Stdin is what the command reads on its standard input, by size and
	// digest (the broker holds the bytes); nil: /dev/null.
	Stdin *Stdin `json:"stdin,omitempty"`
}

// Stdin is a command's standard input by size and SHA-256 (hex). It is part
// of the canonical request: a plan approved for one input runs with no other.
type Stdin struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Context is what the daemon knows, not the caller.
type Context struct {
	Workspaces []string // absolute workspace roots
	Protected  []string // termd's own config/policy/keys/state paths
	Home       string   // the principal's home (may be empty)
	// Sandbox: executions are confined by a fully enforced sandbox profile
	// (termd's sandbox is required or best effort and the kernel has every
	// feature). Project code that stays in the workspace and off the
	// network then runs without approval in confirm mode, and so does a
	// plain write inside the workspace unless the policy's
	// sandboxed_workspace_writes says ask.
	Sandbox bool
	// SandboxBy names what enforces it ("Landlock", "Seatbelt"), for the
	// reasons a decision gives.
	SandboxBy string
	// Credentials are the credentials this caller may ask for, by name
	// (others are "not defined for you", whether they exist or not).
	Credentials map[string]verdict.CredentialScope
	// EgressLists are the names of the configured egress allow-lists; nil
	// (no such configuration) accepts any well-formed "egress:NAME", which
	// the daemon then refuses at execution unless it runs an egress proxy.
	EgressLists []string
	// Paths is the memo of the file system's answers for one execution
	// (Execute's re-check, then its sandbox), never kept beyond it; nil: the
	// decision keeps a memo of its own.
	Paths pathmemo.Memo
}

// Step is one stage of a decision, for explain (internal/policyjson's, which
// `termctl policy check --explain` prints too).
type Step = policyjson.Step

// Decision is the policy's answer for one request.
type Decision struct {
	Verdict         verdict.Verdict   `json:"verdict"`
	Risk            verdict.Risk      `json:"risk"`
	Reasons         []string          `json:"reasons"`
	Rules           []string          `json:"rules"`
	Mode            verdict.Mode      `json:"mode"`
	PolicyVersion   string            `json:"policy_version"`
	RequestHash     string            `json:"request_hash"`
	Argv            []string          `json:"argv"`
	ExecArgv        []string          `json:"exec_argv,omitempty"`
	ResolvedPath    string            `json:"resolved_path,omitempty"`
	BinarySHA256    string            `json:"binary_sha256,omitempty"`
	Cwd             string            `json:"cwd,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
	ExecEnv         map[string]string `json:"exec_env,omitempty"`
	Timeout         time.Duration     `json:"timeout"`
	Network         bool              `json:"network"`
	RunsProjectCode bool              `json:"runs_project_code"`
	ReadOnly        bool              `json:"read_only"`
	Writes          []string          `json:"writes,omitempty"`
	// ProjectFiles: digests of the entry files a project-code command reads
	// (Makefile, package.json, ...), bound into the request hash.
	ProjectFiles map[string]string `json:"project_files,omitempty"`
	RunAs        string            `json:"run_as,omitempty"`
	// Sandbox is how the kernel confines the execution.
	Sandbox SandboxProfile `json:"sandbox"`
	// TTY is the terminal the command runs on (sizes defaulted), or nil.
	TTY *Terminal `json:"tty,omitempty"`
	// Credentials are the names of the credentials the command receives,
	// sorted.
	Credentials []string `json:"credentials,omitempty"`
	// Privileged: the command runs as real host root; asked, always.
	Privileged bool `json:"privileged,omitempty"`
	// Stdin is the command's standard input by size and digest, or nil.
	Stdin *Stdin `json:"stdin,omitempty"`
	Steps []Step `json:"steps"`
}

// Limits are the execution bounds of the policy.
type Limits struct {
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	OutputBytes    int64
	// OutputBudget is the total output one execution may write (both
	// streams); past it the execution ends in state output_limit.
	OutputBudget int64
	MemoryBytes  int64
	Pids         int64
	Grace        time.Duration
}

// DefaultOutputBudget is limits.output_budget when a system policy leaves it out.
const DefaultOutputBudget = 64 << 20

// Sandbox profile names (domain.ReadOnly, domain.WorkspaceWrite).
const (
	SandboxReadOnly       = domain.ReadOnly
	SandboxWorkspaceWrite = domain.WorkspaceWrite
)

// SandboxProfile is how the kernel confines a plan's execution: the one
// profile type, daemon/domain's, which the sandbox enforces and the API and
// the receipt are derived from. It is part of the canonical request, so an
// approval binds to it.
type SandboxProfile = domain.Profile

// Terminal is a pseudo-terminal a request asks for. It is part of the
// canonical request: an approval approves a terminal of this size.
type Terminal struct {
	Rows uint16        `json:"rows"`
	Cols uint16        `json:"cols"`
	Idle time.Duration `json:"idle"` // no output and no input this long ends it
}

// CanonRequest is the canonical request: everything an approval approves.
// Its SHA-256 is the request hash that approvals and receipts refer to, so a
// different binary, working directory, environment, limit, mode, policy or
// verdict is a different request.
type CanonRequest struct {
	Argv          []string          `json:"argv"`
	ExecArgv      []string          `json:"exec_argv"`
	ResolvedPath  string            `json:"resolved_path"`
	BinarySHA256  string            `json:"binary_sha256"`
	Cwd           string            `json:"cwd"`
	Env           map[string]string `json:"env"`
	ExecEnv       map[string]string `json:"exec_env"`
	Mode          verdict.Mode      `json:"mode"`
	TimeoutMS     int64             `json:"timeout_ms"`
	Limits        CanonLimits       `json:"limits"`
	Network       bool              `json:"network"`
	RunAs         string            `json:"run_as"`
	PolicyVersion string            `json:"policy_version"`
	Verdict       verdict.Verdict   `json:"verdict"`
	Risk          verdict.Risk      `json:"risk"`
	ProjectFiles  map[string]string `json:"project_files,omitempty"`
	Sandbox       SandboxProfile    `json:"sandbox"`
	TTY           *CanonTerminal    `json:"tty,omitempty"`
	// Credentials by name only; absent when none (so the hash of a request
	// without credentials is what it was before they existed).
	Credentials []string `json:"credentials,omitempty"`
	// Privileged: absent when false (the hash of an ordinary request is
	// what it was before the field existed).
	Privileged bool `json:"privileged,omitempty"`
	// Stdin by size and SHA-256; absent without one (the hash of a request
	// without stdin is what it was before the field existed).
	Stdin *Stdin `json:"stdin,omitempty"`
}

// CanonTerminal is a terminal in the canonical request, in the same units
// as the rest of it (milliseconds).
type CanonTerminal struct {
	Rows   uint16 `json:"rows"`
	Cols   uint16 `json:"cols"`
	IdleMS int64  `json:"idle_ms"`
}

type CanonLimits struct {
	OutputBytes int64 `json:"output_bytes"`
	MemoryBytes int64 `json:"memory_bytes"`
	Pids        int64 `json:"pids"`
	GraceMS     int64 `json:"grace_ms"`
}

func HashRequest(c CanonRequest) string {
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	if c.Argv == nil {
		c.Argv = []string{}
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
