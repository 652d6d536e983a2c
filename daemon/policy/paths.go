package policy

import (
	"strings"

	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

// checkPath decides one resolved path. names says the command reads only
// the names and metadata of what is below a directory (ls /etc).
func (p *Policy) checkPath(real string, write, names bool, ctx *toolspec.DecideCtx) toolspec.PathVerdict {
	spec := &p.spec
	// termd's own files: no reads or writes.
	for _, pr := range ctx.Protected {
		if toolspec.Within(pr, real) {
			return toolspec.PathVerdict{Verdict: verdict.Deny, Risk: verdict.RiskCritical, Reason: "path " + real + " is termd's own configuration, policy, key or state" + toolspec.WhyOwn}
		}
		if write && toolspec.Within(real, pr) {
			return toolspec.PathVerdict{Verdict: verdict.Deny, Risk: verdict.RiskCritical, Reason: "write to " + real + " would reach termd's own files" + toolspec.WhyOwn}
		}
	}
	for _, pat := range spec.Paths.SensitiveRead {
		for _, e := range toolspec.ExpandPattern(pat, ctx.Home) {
			if toolspec.MatchPrefix(e, real) {
				return toolspec.PathVerdict{Verdict: verdict.Deny, Risk: verdict.RiskCritical, Reason: "path " + real + " holds secrets (" + pat + "): denied even inside the sandbox, since what a command reads it can print into its output, and so into the receipt and the agent's context"}
			}
		}
	}
	if write {
		if why := p.protectedWrite(real, ctx); why != "" {
			return toolspec.PathVerdict{Verdict: verdict.Deny, Risk: verdict.RiskCritical, Reason: "write to " + real + " is denied: " + why + " (denied even inside the sandbox: what the file holds runs later, outside it)"}
		}
	}
	inWS := toolspec.InAnyWorkspace(real, ctx)
	if inWS {
		if v, ok := toolspec.HardLinked(real, write); ok {
			return v
		}
	}
	if write && real == "/dev/null" {
		// Output thrown away (curl -o /dev/null, sort -o /dev/null): the
		// sandbox lets every command write there too.
		return toolspec.PathVerdict{Verdict: verdict.Allow, Risk: verdict.RiskLow, Reason: ""}
	}
	if write {
		if !inWS {
			return toolspec.PathVerdict{Verdict: verdict.Deny, Risk: verdict.RiskHigh, Reason: "write to " + real + " is outside the workspace roots"}
		}
		for _, ws := range ctx.Workspaces {
			if real == ws {
				return toolspec.PathVerdict{Verdict: verdict.Ask, Risk: verdict.RiskHigh, Reason: "write to the workspace root directory " + real}
			}
		}
		return toolspec.PathVerdict{Verdict: verdict.Allow, Risk: verdict.RiskLow, Reason: ""}
	}
	if inWS {
		return toolspec.PathVerdict{Verdict: verdict.Allow, Risk: verdict.RiskLow, Reason: ""}
	}
	// termd runs as root: a file outside the workspace that ordinary users
	// cannot read (mode, or an unsearchable parent) is a secret by
	// definition (/etc/krb5.keytab, /etc/kubernetes/admin.conf, /root/...).
	if why := toolspec.PrivilegedOnly(real); why != "" {
		return toolspec.PathVerdict{Verdict: verdict.Deny, Risk: verdict.RiskHigh, Reason: "read of " + real + " outside the workspace is denied: " + why + " (termd runs as root)"}
	}
	for _, pat := range spec.Paths.SensitiveRead {
		if names {
			break
		}
		for _, e := range toolspec.ExpandPattern(pat, ctx.Home) {
			if toolspec.IsAncestorOf(real, e) {
				return toolspec.PathVerdict{Verdict: verdict.Ask, Risk: verdict.RiskHigh, Reason: "read of " + real + " outside the workspace may reach secrets (" + pat + ")"}
			}
		}
	}
	for _, pat := range spec.Paths.PublicRead {
		if toolspec.MatchPrefix(pat, real) {
			return toolspec.PathVerdict{Verdict: verdict.Allow, Risk: verdict.RiskMedium, Reason: "read of public system path " + real + " outside the workspace"}
		}
	}
	if p.systemRead(real) {
		if names {
			return toolspec.PathVerdict{Verdict: verdict.Allow, Risk: verdict.RiskMedium, Reason: "read of the names in system path " + real + " outside the workspace"}
		}
		// /etc as a whole holds configuration that is world-readable by
		// accident on many machines: only paths.public_read is free.
		return toolspec.PathVerdict{Verdict: verdict.Ask, Risk: verdict.RiskMedium, Reason: "read of " + real + " outside the workspace: only toolchain directories and public facts (paths.public_read) are read without approval"}
	}
	return toolspec.PathVerdict{Verdict: verdict.Ask, Risk: verdict.RiskMedium, Reason: "read of " + real + " outside the workspace roots"}
}

// protectedWrite names why a write target later runs code, or "".
func (p *Policy) protectedWrite(real string, ctx *toolspec.DecideCtx) string {
	spec := &p.spec
	for _, pat := range spec.Paths.Protected {
		for _, e := range toolspec.ExpandPattern(pat, ctx.Home) {
			if toolspec.MatchPrefix(e, real) {
				return "protected path " + pat
			}
		}
	}
	// Names compare without case: on a case-insensitive file system (macOS)
	// ".GIT/CONFIG" is .git/config.
	comps := strings.Split(strings.Trim(real, "/"), "/")
	last := comps[len(comps)-1]
	for _, n := range spec.Paths.ProtectedNames {
		if strings.EqualFold(last, n) {
			return n + " files run code or configure tools that do"
		}
	}
	for i, c := range comps {
		for _, d := range spec.Paths.ProtectedDirs {
			if strings.EqualFold(c, d) {
				return d + " holds editor, agent or tool configuration that runs code"
			}
		}
		if strings.EqualFold(c, ".git") {
			if i == len(comps)-1 {
				return ".git directory itself"
			}
			// hooks, config, config.worktree, info/attributes, modules/*/config,
			// worktrees/*/: everything in a git directory is git's to write.
			return ".git/" + strings.Join(comps[i+1:], "/") + " is repository state and configuration (hooks, config) that can run code"
		}
	}
	return ""
}
