package policy

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/internal/program"
)

// sandboxFor derives the profile from what the decision already knows.
func (p *Policy) sandboxFor(d *decision.Decision, base string, reads []string, ctx *toolspec.DecideCtx) decision.SandboxProfile {
	sb := decision.SandboxProfile{Profile: decision.SandboxWorkspaceWrite, Network: d.Network}
	if d.ReadOnly {
		sb.Profile = decision.SandboxReadOnly
	}
	if d.ResolvedPath != "" {
		sb.Exec = program.Exec(d.ResolvedPath, p.spec.TrustedPath...)
	}
	ps := p.programs[base]
	for _, x := range ps.SandboxExec {
		if rest, ok := strings.CutPrefix(x, "$PROGDIR/"); ok {
			if d.ResolvedPath == "" {
				continue
			}
			x = filepath.Join(filepath.Dir(d.ResolvedPath), rest)
		}
		sb.Exec = append(sb.Exec, x)
	}
	sb.Cache = append(sb.Cache, ps.SandboxCache...)
	for _, r := range reads {
		if !toolspec.InAnyWorkspace(r, ctx) && !p.systemRead(r) && !slices.Contains(sb.Read, r) {
			sb.Read = append(sb.Read, r)
		}
	}
	for _, w := range d.Writes {
		if !toolspec.InAnyWorkspace(w, ctx) && w != "/dev/null" && !slices.Contains(sb.Write, w) {
			sb.Write = append(sb.Write, filepath.Clean(w))
		}
	}
	return sb
}

func (p *Policy) systemRead(real string) bool {
	for _, pat := range p.spec.Paths.SystemRead {
		if toolspec.MatchPrefix(pat, real) {
			return true
		}
	}
	return false
}

// SystemRead is the policy's system read set (what every execution may read
// outside the workspace).
func (p *Policy) SystemRead() []string { return append([]string(nil), p.spec.Paths.SystemRead...) }

// ProtectedNames and ProtectedDirs are the write-protected names the sandbox
// keeps read-only inside writable workspaces.
func (p *Policy) ProtectedNames() []string {
	return append([]string(nil), p.spec.Paths.ProtectedNames...)
}

func (p *Policy) ProtectedDirs() []string {
	return append([]string(nil), p.spec.Paths.ProtectedDirs...)
}
