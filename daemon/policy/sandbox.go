package policy

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/termd/termd/internal/program"
)

// Sandbox profile names (see daemon/sandbox and docs/SANDBOX.md).
const (
	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
)

// SandboxProfile is how the kernel confines a plan's execution. It is part of
// the canonical request, so an approval binds to it.
type SandboxProfile struct {
	// Profile: read-only (reads of the workspace and the system read set,
	// no writes, exec of the program only) or workspace-write (writes
	// beneath the workspace roots except protected paths, exec of system
	// directories and the workspace).
	Profile string `json:"profile"`
	// Network: the execution keeps the host's network (NetworkMode host).
	Network bool `json:"network"`
	// NetworkMode is the network the execution gets (netmode.Mode: none,
	// workspace-loopback, host or egress:NAME); see network.go.
	NetworkMode string `json:"network_mode,omitempty"`
	// Exec: what a read-only execution may execute (the program, its
	// interpreter, the helpers the program's spec declares).
	Exec []string `json:"exec,omitempty"`
	// Read: approved reads outside the workspace and the system read set.
	Read []string `json:"read,omitempty"`
	// Write: approved writes outside the workspace roots.
	Write []string `json:"write,omitempty"`
	// Cache: the program's own cache directories under the private HOME
	// ("~/…"), writable in either profile.
	Cache []string `json:"cache,omitempty"`
}

// sandboxFor derives the profile from what the decision already knows.
func (p *Policy) sandboxFor(d *Decision, base string, reads []string, ctx *decideCtx) SandboxProfile {
	sb := SandboxProfile{Profile: SandboxWorkspaceWrite, Network: d.Network}
	if d.ReadOnly {
		sb.Profile = SandboxReadOnly
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
		if !inAnyWorkspace(r, ctx) && !p.systemRead(r) && !slices.Contains(sb.Read, r) {
			sb.Read = append(sb.Read, r)
		}
	}
	for _, w := range d.Writes {
		if !inAnyWorkspace(w, ctx) && w != "/dev/null" && !slices.Contains(sb.Write, w) {
			sb.Write = append(sb.Write, filepath.Clean(w))
		}
	}
	return sb
}

func (p *Policy) systemRead(real string) bool {
	for _, pat := range p.spec.Paths.SystemRead {
		if matchPrefix(pat, real) {
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
