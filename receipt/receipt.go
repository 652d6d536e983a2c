// Package receipt is the receipt format: schema 1.0 and its JSON Schema,
// RFC 8785 canonical JSON, Ed25519 + HMAC signing and verification, and the
// public-key file formats. It holds no store and no daemon state, so the
// clients (termctl, the gateway) verify a receipt offline with only a public
// key without linking the daemon's storage; daemon/receiptstore keeps the
// keys and the chain.
package receipt

import (
	"fmt"
	"time"
)

// SchemaVersion is the receipt schema version this package writes and reads.
const SchemaVersion = "1.7"

// GenesisHash is the prev_hash of the first receipt in a chain.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Status is the final state a receipt records.
type Status string

const (
	StatusSucceeded      Status = "succeeded"
	StatusFailed         Status = "failed"
	StatusTimedOut       Status = "timed_out"
	StatusCancelled      Status = "cancelled"
	StatusKilled         Status = "killed"
	StatusBlocked        Status = "blocked"
	StatusDenied         Status = "denied"
	StatusExpired        Status = "expired"
	StatusOutcomeUnknown Status = "outcome_unknown"
	// StatusOutputLimit: the command wrote more than the policy's output
	// budget (limits.output_budget) and termd ended it.
	StatusOutputLimit Status = "output_limit"
)

// Statuses lists every final status, in a stable order.
var Statuses = []Status{
	StatusSucceeded, StatusFailed, StatusTimedOut, StatusCancelled, StatusKilled,
	StatusBlocked, StatusDenied, StatusExpired, StatusOutcomeUnknown, StatusOutputLimit,
}

// Valid reports whether s is a known final status.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Ran reports whether a process may have been started for this status.
// Denied, blocked and expired receipts record a decision: nothing ran.
func (s Status) Ran() bool {
	switch s {
	case StatusDenied, StatusBlocked, StatusExpired:
		return false
	}
	return true
}

// Decision is the policy decision (ARCHITECTURE §4).
type Decision string

const (
	DecisionAllow Decision = "allow"
	DecisionAsk   Decision = "ask"
	DecisionDeny  Decision = "deny"
)

// Principal is who asked or approved, as the daemon established it (peer
// credentials or the gateway token's grant), never as the caller claimed.
type Principal struct {
	// Kind is how the principal was identified: "unix" (SO_PEERCRED),
	// "token" (gateway HTTP token), "cert" (a client certificate on the
	// mutual-TLS listener, schema 1.7), or "system" (the daemon itself, e.g. for
	// outcome_unknown or expiry receipts).
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Role string `json:"role"` // operator, agent, viewer, system
	UID  *int   `json:"uid,omitempty"`
	GID  *int   `json:"gid,omitempty"`
	Name string `json:"name,omitempty"`
	// Gateway is the principal of the gateway certificate through which
	// the person Name acted (kind "cert", schema 1.7; absent otherwise).
	Gateway string `json:"gateway,omitempty"`
}

// RunAs is the identity the command ran as.
type RunAs struct {
	User string `json:"user"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	// HostUID: the command ran as uid 0 in a user namespace and as this
	// unprivileged uid on the host (schema 1.5; absent when it kept its uid).
	HostUID int `json:"host_uid,omitempty"`
}

// Limits are the bounds the execution ran under. Zero means "not set".
type Limits struct {
	TimeoutMs      int64 `json:"timeout_ms"`
	MaxOutputBytes int64 `json:"max_output_bytes"`
	MemoryBytes    int64 `json:"memory_bytes,omitempty"`
	CPUPercent     int64 `json:"cpu_percent,omitempty"`
	MaxPids        int64 `json:"max_pids,omitempty"`
}

// Policy is the decision as the policy engine made it.
type Policy struct {
	Allowed          bool     `json:"allowed"`
	Risk             string   `json:"risk"`
	RequiresApproval bool     `json:"requires_approval"`
	Reasons          []string `json:"reasons"`
	Argv             []string `json:"argv"`
	Version          string   `json:"version"`
	RuleIDs          []string `json:"rule_ids"`
}

// Receipt is a schema 1.7 receipt. Field names are part of the published
// schema (schema/receipt-1.7.json); do not rename them.
type Receipt struct {
	SchemaVersion string `json:"schema_version"`
	ID            string `json:"id"`
	Seq           int64  `json:"seq"`
	PrevHash      string `json:"prev_hash"`

	PlanID      string `json:"plan_id"`
	SessionID   string `json:"session_id"`
	ExecutionID string `json:"execution_id,omitempty"`
	RequestHash string `json:"request_hash"`

	Requester Principal  `json:"requester"`
	Approver  *Principal `json:"approver,omitempty"`

	Command       string `json:"command"`
	CommandSHA256 string `json:"command_sha256"` // keyed: HMAC-SHA256 with the daemon digest key
	BinaryPath    string `json:"binary_path"`
	BinarySHA256  string `json:"binary_sha256"`
	Cwd           string `json:"cwd"`
	RunAs         *RunAs `json:"run_as,omitempty"`
	// Privileged: the plan ran as real host root, approved by a person
	// (schema 1.5; absent otherwise).
	Privileged bool   `json:"privileged,omitempty"`
	Mode       string `json:"mode"`
	Risk       string `json:"risk"`
	Approved   bool   `json:"approved"`
	// GrantID names the operator's grant that approved the plan (schema
	// 1.2; absent for per-plan approvals).
	GrantID  string `json:"grant_id,omitempty"`
	Decision string `json:"decision"`
	Policy   Policy `json:"policy"`
	Limits   Limits `json:"limits"`

	Status     Status    `json:"status"`
	Detail     string    `json:"detail,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	DurationMs int64     `json:"duration_ms"` // from the monotonic clock, not FinishedAt-StartedAt
	ExitCode   *int      `json:"exit_code"`
	Signal     string    `json:"signal"`

	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	OutputTruncated bool   `json:"output_truncated"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutDigest    string `json:"stdout_digest"` // keyed digest of the full stream
	StderrDigest    string `json:"stderr_digest"`

	// Sandbox records what confined the execution (schema 1.1; absent
	// when nothing ran).
	Sandbox *Sandbox `json:"sandbox,omitempty"`

	// Terminal is the pseudo-terminal of a PTY execution and what was
	// typed into it (schema 1.3; absent for ordinary executions).
	Terminal *Terminal `json:"terminal,omitempty"`

	// Credentials are the names of the credentials the execution received
	// (schema 1.4; absent when none). Never a value.
	Credentials []string `json:"credentials,omitempty"`

	// GitIdentity is the git author/committer identity termd offered the
	// command (schema 1.5; absent when the request set its own).
	GitIdentity *GitIdentity `json:"git_identity,omitempty"`

	// Stdin is the standard input the plan gave the command (schema 1.6;
	// absent: /dev/null).
	Stdin *Stdin `json:"stdin,omitempty"`
	// Egress is what the execution reached through the allow-list proxy
	// (schema 1.6; absent unless its network mode was egress:NAME).
	Egress *Egress `json:"egress,omitempty"`

	AdviceDigest    string `json:"advice_digest,omitempty"`
	SharingRedacted bool   `json:"sharing_redacted,omitempty"`

	KeyID string `json:"key_id"`
	// Signature is HMAC-SHA256 (lowercase hex) over the canonical receipt
	// without signature and signature_ed25519.
	Signature string `json:"signature"`
	// SignatureEd25519 is the Ed25519 signature (lowercase hex) over the same
	// bytes, by the key named in key_id.
	SignatureEd25519 string `json:"signature_ed25519"`
}

// Sandbox is the kernel confinement of one execution (docs/SANDBOX.md).
type Sandbox struct {
	Profile          string `json:"profile"`
	Level            string `json:"level"` // full, partial or none
	Mode             string `json:"mode"`  // required, best_effort or off
	Platform         string `json:"platform,omitempty"`
	LandlockABI      int    `json:"landlock_abi,omitempty"`
	Seccomp          bool   `json:"seccomp"`
	MountNamespace   bool   `json:"mount_namespace"`
	NetworkNamespace bool   `json:"network_namespace"`
	// NetworkMode is the network the plan gave the execution (schema 1.6:
	// none, workspace-loopback, host or egress:NAME).
	NetworkMode         string   `json:"network_mode,omitempty"`
	CapabilitiesDropped bool     `json:"capabilities_dropped"`
	Missing             []string `json:"missing,omitempty"`
}

// Stdin is a command's standard input by size and keyed digest
// (HMAC-SHA256 with the digest key, as command_sha256).
type Stdin struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Egress lists the destinations an execution reached through termd's
// allow-list proxy and the attempts it refused (docs/SANDBOX.md, Network).
type Egress struct {
	AllowList    string              `json:"allow_list"`
	Destinations []EgressDestination `json:"destinations"`
	Refused      []EgressRefusal     `json:"refused"`
	// Dropped counts destinations and refusals past the bound of 256 each.
	Dropped int64 `json:"dropped,omitempty"`
}

// EgressDestination is one host and port reached, with the bytes sent to it
// (up) and received from it (down).
type EgressDestination struct {
	Host        string `json:"host"`
	Port        int    `json:"port"`
	Address     string `json:"address,omitempty"`
	Connections int64  `json:"connections"`
	BytesUp     int64  `json:"bytes_up"`
	BytesDown   int64  `json:"bytes_down"`
}

// EgressRefusal is a refused (or failed) attempt: host, port, a stable
// reason (not_on_allow_list, port_not_allowed, ip_literal_not_listed,
// private_address, resolve_failed, connect_failed, bad_request,
// too_many_connections), its detail and how many times.
type EgressRefusal struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
	Count  int64  `json:"count"`
}

// GitIdentity is the git identity termd gave an execution as git's
// lowest-precedence (system) config: a repository's or HOME's user.name
// and user.email, and GIT_AUTHOR_*/GIT_COMMITTER_* in the request, win.
type GitIdentity struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	// Source is "config" (the principal's git_identity entry) or
	// "default" (NAME (via termd) <NAME@HOST>).
	Source string `json:"source"`
}

// Terminal is a PTY execution's terminal and its inputs (docs/TERMINALS.md).
type Terminal struct {
	Rows          int             `json:"rows"`
	Cols          int             `json:"cols"`
	IdleTimeoutMs int64           `json:"idle_timeout_ms,omitempty"`
	Inputs        []TerminalInput `json:"inputs"`
	// InputsDropped counts inputs past the receipt's bound (not listed).
	InputsDropped int64 `json:"inputs_dropped,omitempty"`
}

// TerminalInput is one input (or resize, or input take-over) on a terminal.
type TerminalInput struct {
	Seq  int64     `json:"seq"`
	At   time.Time `json:"at"`
	By   string    `json:"by"`
	Kind string    `json:"kind"` // input, resize, input_taken or input_released (1.6)
	// Text is what was typed, redacted; keys as <NAME>.
	Text string `json:"text"`
	// SHA256 is the hex digest of the raw bytes written ("" for resize,
	// input_taken and input_released).
	SHA256 string `json:"sha256"`
}

// signatureFields are the members excluded from the signed canonical form.
var signatureFields = []string{"signature", "signature_ed25519"}

// Normalize puts fields into the form that is signed: UTC times, non-nil
// slices, the schema version. It is idempotent.
func (r *Receipt) Normalize() {
	if r.SchemaVersion == "" {
		r.SchemaVersion = SchemaVersion
	}
	r.StartedAt = r.StartedAt.UTC().Round(0)
	r.FinishedAt = r.FinishedAt.UTC().Round(0)
	if r.Policy.Reasons == nil {
		r.Policy.Reasons = []string{}
	}
	if r.Policy.Argv == nil {
		r.Policy.Argv = []string{}
	}
	if r.Policy.RuleIDs == nil {
		r.Policy.RuleIDs = []string{}
	}
	if t := r.Terminal; t != nil {
		if t.Inputs == nil {
			t.Inputs = []TerminalInput{}
		}
		for i := range t.Inputs {
			t.Inputs[i].At = t.Inputs[i].At.UTC().Round(0)
		}
	}
}

// Clone returns a deep copy.
func (r *Receipt) Clone() *Receipt {
	c := *r
	if r.Approver != nil {
		a := *r.Approver
		c.Approver = &a
	}
	c.Requester = clonePrincipal(r.Requester)
	if c.Approver != nil {
		*c.Approver = clonePrincipal(*c.Approver)
	}
	if r.RunAs != nil {
		ra := *r.RunAs
		c.RunAs = &ra
	}
	if r.ExitCode != nil {
		e := *r.ExitCode
		c.ExitCode = &e
	}
	c.Policy.Reasons = append([]string(nil), r.Policy.Reasons...)
	c.Policy.Argv = append([]string(nil), r.Policy.Argv...)
	c.Policy.RuleIDs = append([]string(nil), r.Policy.RuleIDs...)
	if r.Terminal != nil {
		t := *r.Terminal
		t.Inputs = append([]TerminalInput(nil), r.Terminal.Inputs...)
		c.Terminal = &t
	}
	return &c
}

func clonePrincipal(p Principal) Principal {
	if p.UID != nil {
		u := *p.UID
		p.UID = &u
	}
	if p.GID != nil {
		g := *p.GID
		p.GID = &g
	}
	return p
}

// Error wraps a verification failure.
type VerifyError struct {
	Seq    int64
	Reason string
}

func (e *VerifyError) Error() string {
	if e.Seq > 0 {
		return fmt.Sprintf("receipt seq %d: %s", e.Seq, e.Reason)
	}
	return "receipt: " + e.Reason
}
