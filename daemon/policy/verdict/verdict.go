// Package verdict is the vocabulary of a policy decision: the execution
// mode a request asks for, the verdict (allow, ask, deny) and the risk.
// It imports nothing of termd; every other policy package may import it.
package verdict

import (
	"fmt"
	"slices"
)

// Mode is the execution mode of a request.
type Mode string

const (
	ModeInspect Mode = "inspect"
	ModeConfirm Mode = "confirm"
	ModeTrusted Mode = "trusted"
)

// Each vocabulary is one list in rank order (strictest mode, mildest
// verdict, lowest risk first): parsing and ranking both read it.
var (
	modes    = []Mode{ModeInspect, ModeConfirm, ModeTrusted}
	verdicts = []Verdict{Allow, Ask, Deny}
	risks    = []Risk{RiskLow, RiskMedium, RiskHigh, RiskCritical}
)

// parse returns s as a word of vocabulary words, or false.
func parse[T ~string](words []T, s string) (T, bool) {
	if slices.Contains(words, T(s)) {
		return T(s), true
	}
	return "", false
}

// rank is w's place in words; unknown words get unknown.
func rank[T comparable](words []T, w T, unknown int) int {
	if i := slices.Index(words, w); i >= 0 {
		return i
	}
	return unknown
}

// ParseMode parses a mode name; unknown names are an error.
func ParseMode(s string) (Mode, error) {
	if m, ok := parse(modes, s); ok {
		return m, nil
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

// ModeRank orders modes from strictest (0) to most permissive; an unknown
// mode is -1.
func ModeRank(m Mode) int { return rank(modes, m, -1) }

// Verdict is the outcome of a decision.
type Verdict string

const (
	Allow Verdict = "allow"
	Ask   Verdict = "ask"
	Deny  Verdict = "deny"
)

// VerdictRank orders verdicts from allow (0) to deny (2); anything unknown
// ranks as deny.
func VerdictRank(v Verdict) int { return rank(verdicts, v, 2) }

// ParseVerdict parses a verdict name.
func ParseVerdict(s string) (Verdict, bool) { return parse(verdicts, s) }

// Risk grades a decision.
type Risk string

const (
	RiskLow      Risk = "low"
	RiskMedium   Risk = "medium"
	RiskHigh     Risk = "high"
	RiskCritical Risk = "critical"
)

// RiskRank orders risks from low (0) to critical (3); anything unknown
// ranks as critical.
func RiskRank(r Risk) int { return rank(risks, r, 3) }

// ParseRisk parses a risk name.
func ParseRisk(s string) (Risk, bool) { return parse(risks, s) }

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
