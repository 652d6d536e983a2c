package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

// MaxCredentials bounds the credentials one request may name.
const MaxCredentials = 16

// checkCredentials decides the credentials a request names. An unknown
// name and a name the caller may not ask for get the same answer, so a
// caller cannot learn which credentials exist for others.
func (p *Policy) checkCredentials(req decision.Request, ctx *toolspec.DecideCtx, s *state) {
	if len(req.Credentials) == 0 {
		return
	}
	d := s.d
	if len(req.Credentials) > MaxCredentials {
		s.deny(verdict.RiskMedium, fmt.Sprintf("%d credentials requested; the limit is %d", len(req.Credentials), MaxCredentials))
		s.step("credentials", "deny", "too many")
		return
	}
	names := slices.Clone(req.Credentials)
	slices.Sort(names)
	names = slices.Compact(names)
	program := ""
	if len(d.Argv) > 0 {
		program = grammar.BaseName(d.Argv[0])
	}
	ok := true
	for _, n := range names {
		sc, known := ctx.Credentials[n]
		if !envNameOK.MatchString(n) || !known {
			s.deny(verdict.RiskMedium, fmt.Sprintf("credential %s is not defined for you: `termctl credentials list` shows the ones you may ask for (an operator defines them in termd's config)", grammar.Clip(grammar.Printable(n))))
			ok = false
			continue
		}
		if len(sc.Programs) > 0 && !programIn(sc.Programs, d) {
			s.deny(verdict.RiskHigh, fmt.Sprintf("credential %s is available only to %s; this plan runs %s", n, strings.Join(sc.Programs, ", "), program))
			ok = false
			continue
		}
		for _, pat := range p.envDenyList() {
			if envPatternMatch(pat, n) {
				s.deny(verdict.RiskHigh, fmt.Sprintf("credential %s would set %s, a loader, hook or tool-control variable the policy denies (%s); the operator must rename it", n, n, pat))
				ok = false
			}
		}
		if _, set := req.Env[n]; set {
			s.deny(verdict.RiskMedium, fmt.Sprintf("the request sets the environment variable %s and asks for the credential %s: drop one", n, n))
			ok = false
		} else if _, set := d.ExecEnv[n]; set {
			s.deny(verdict.RiskMedium, fmt.Sprintf("%s sets %s itself for this command, so the credential %s cannot be given to it", program, n, n))
			ok = false
		}
	}
	d.Credentials = names
	if !ok {
		s.step("credentials", "deny", strings.Join(names, ","))
		return
	}
	switch d.Mode {
	case verdict.ModeInspect:
		s.deny(verdict.RiskMedium, "inspect mode never receives credentials ("+strings.Join(names, ", ")+"): plan it in confirm mode")
		s.step("credentials", "deny", "inspect mode")
		return
	case verdict.ModeConfirm:
		s.raise(verdict.Ask, verdict.RiskHigh, "it receives the credentials "+strings.Join(names, ", ")+" (an operator approves, or a grant naming them covers it)")
	}
	s.step("credentials", "ok", strings.Join(names, ","))
}

// programIn reports whether the decided program is one of progs: a bare
// name matches a program found through the trusted PATH (not a path the
// request named), an absolute path matches the resolved binary.
func programIn(progs []string, d *decision.Decision) bool {
	if len(d.Argv) == 0 || d.ResolvedPath == "" {
		return false
	}
	a0 := d.Argv[0]
	for _, pr := range progs {
		if !strings.Contains(pr, "/") {
			if !strings.Contains(a0, "/") && a0 == pr {
				return true
			}
			continue
		}
		if pr == d.ResolvedPath {
			return true
		}
		if real, err := filepath.EvalSymlinks(pr); err == nil && real == d.ResolvedPath {
			return true
		}
	}
	return false
}
