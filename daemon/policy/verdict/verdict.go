// Package verdict is the vocabulary of a policy decision: the execution
// mode a request asks for, the verdict (allow, ask, deny) and the risk.
// It imports nothing of termd; every other policy package may import it.
package verdict

import (
	"fmt"
)

// Mode is the execution mode of a request.
type Mode string

const (
	ModeInspect Mode = "inspect"
	ModeConfirm Mode = "confirm"
	ModeTrusted Mode = "trusted"
)

// ParseMode parses a mode name; unknown names are an error.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeInspect, ModeConfirm, ModeTrusted:
		return Mode(s), nil
	}
	return "", fmt.Errorf("unknown mode %q (want inspect, confirm or trusted)", s)
}

// MorePermissiveThan reports whether m lets more run than o (trusted, then
// confirm, then inspect), by modeRank, the one ordering of modes: the broker
// asks it to keep weaker modes for operators rather than ranking modes itself.
// An unknown mode counts as more permissive than any (fail closed).
func (m Mode) MorePermissiveThan(o Mode) bool {
	if ModeRank(m) < 0 {
		return true
	}
	return ModeRank(m) > ModeRank(o)
}

// ModeRank orders modes from strictest (0) to most permissive.
func ModeRank(m Mode) int {
	switch m {
	case ModeInspect:
		return 0
	case ModeConfirm:
		return 1
	case ModeTrusted:
		return 2
	}
	return -1
}

// Verdict is the outcome of a decision.
type Verdict string

const (
	Allow Verdict = "allow"
	Ask   Verdict = "ask"
	Deny  Verdict = "deny"
)

func VerdictRank(v Verdict) int {
	switch v {
	case Allow:
		return 0
	case Ask:
		return 1
	}
	return 2 // deny and anything unknown
}

func ParseVerdict(s string) (Verdict, bool) {
	switch Verdict(s) {
	case Allow, Ask, Deny:
		return Verdict(s), true
	}
	return "", false
}

// Risk grades a decision.
type Risk string

const (
	RiskLow      Risk = "low"
	RiskMedium   Risk = "medium"
	RiskHigh     Risk = "high"
	RiskCritical Risk = "critical"
)

func RiskRank(r Risk) int {
	switch r {
	case RiskLow:
		return 0
	case RiskMedium:
		return 1
	case RiskHigh:
		return 2
	}
	return 3
}

func ParseRisk(s string) (Risk, bool) {
	switch Risk(s) {
	case RiskLow, RiskMedium, RiskHigh, RiskCritical:
		return Risk(s), true
	}
	return "", false
}

func MaxRisk(a, b Risk) Risk {
	if a == "" {
		return b
	}
	if RiskRank(b) > RiskRank(a) {
		return b
	}
	return a
}

// Credentials by reference (docs/CREDENTIALS.md): a request names the
// credentials its command receives; the daemon tells the policy which ones
// the caller may ask for and which programs may receive each. Values never
// reach the policy: the canonical request and its hash carry names only.

// CredentialScope is what the policy knows of a credential the caller may
// ask for.
type CredentialScope struct {
	// Programs that may receive it: bare names (resolved through the
	// trusted PATH) or absolute paths. Empty: any program.
	Programs []string
}
