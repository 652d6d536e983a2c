package policy

import (
	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grant"
	"github.com/termd/termd/daemon/policy/verdict"

	// The tool families register themselves with toolspec; devtools is
	// imported by the engine for its interpreter knowledge, unixtools only
	// for its registrations.
	_ "github.com/termd/termd/daemon/policy/unixtools"
)

// The decision's vocabulary lives in package verdict and its data in
// package decision (docs/ARCHITECTURE.md, the policy packages); these
// names keep this package's API whole for its callers (the broker, the
// server, termctl policy lint).
type (
	Request        = decision.Request
	Stdin          = decision.Stdin
	Context        = decision.Context
	Step           = decision.Step
	Decision       = decision.Decision
	Limits         = decision.Limits
	SandboxProfile = decision.SandboxProfile
	Terminal       = decision.Terminal
	Pattern        = grant.Pattern
	GrantBinding   = grant.GrantBinding

	Mode            = verdict.Mode
	Verdict         = verdict.Verdict
	Risk            = verdict.Risk
	CredentialScope = verdict.CredentialScope
)

const (
	AnyOperand            = grant.AnyOperand
	DefaultOutputBudget   = decision.DefaultOutputBudget
	SandboxReadOnly       = decision.SandboxReadOnly
	SandboxWorkspaceWrite = decision.SandboxWorkspaceWrite

	ModeInspect = verdict.ModeInspect
	ModeConfirm = verdict.ModeConfirm
	ModeTrusted = verdict.ModeTrusted

	Allow = verdict.Allow
	Ask   = verdict.Ask
	Deny  = verdict.Deny

	RiskLow      = verdict.RiskLow
	RiskMedium   = verdict.RiskMedium
	RiskHigh     = verdict.RiskHigh
	RiskCritical = verdict.RiskCritical
)

// ParseMode parses a mode name; unknown names are an error.
func ParseMode(s string) (Mode, error) { return verdict.ParseMode(s) }

// BindingOf is what a grant made from decision d binds to.
func BindingOf(d Decision) GrantBinding { return grant.BindingOf(d) }
