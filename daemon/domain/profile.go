package domain

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
)

// Sandbox profile names (docs/SANDBOX.md).
const (
	// ReadOnly: read the workspace roots and the system read set, write
	// nothing but /dev/null and a private temporary directory, execute only
	// the resolved program (its interpreter and the helpers its grammar
	// declares), no network.
	ReadOnly = "read-only"
	// WorkspaceWrite: read-only plus writes beneath the workspace roots
	// (protected paths stay read-only) and the principal's private HOME
	// (build caches), execution of system directories and the workspace.
	WorkspaceWrite = "workspace-write"
)

// Profile is how the kernel confines a plan's execution: the one type the
// policy decides (its decision carries it), the sandbox enforces, and the
// API (broker/wire: SandboxProto) and the receipt (executions.ReceiptSandbox, from
// what sandbox.Prepare enforced) are derived from. It is part of the
// canonical request, so an approval binds to it: its JSON form is hashed
// (policy/decision.CanonRequest) and journaled, and must not change.
//
// It holds only what the policy decides. What only the host knows (the
// workspace roots, the private HOME and TMPDIR, termd's hidden files, the
// descriptors a Landlock ruleset binds to) is sandbox.Paths and the launch
// sandbox.Prepare builds.
type Profile struct {
	// Profile is the profile's name: ReadOnly (reads of the workspace and
	// the system read set, no writes, exec of the program only) or
	// WorkspaceWrite (writes beneath the workspace roots except protected
	// paths, exec of system directories and the workspace).
	Profile string `json:"profile"`
	// Network: the execution keeps the host's network (NetworkMode host):
	// no network namespace of its own, no Landlock TCP rules.
	Network bool `json:"network"`
	// NetworkMode is the network the execution gets (netmode.Mode: none,
	// workspace-loopback, host or egress:NAME). Under none, Landlock (ABI
	// 4+) refuses every TCP bind and connect; in a network namespace termd
	// made for it, TCP is left to that namespace.
	NetworkMode string `json:"network_mode,omitempty"`
	// Exec: what a read-only execution may execute (the program, its ELF
	// or #! interpreter, the helpers the program's spec declares).
	Exec []string `json:"exec,omitempty"`
	// Read: approved reads outside the workspace and the system read set.
	Read []string `json:"read,omitempty"`
	// Write: approved writes outside the workspace roots.
	Write []string `json:"write,omitempty"`
	// Cache: the program's own cache directories under the private HOME
	// ("~/…"), writable in either profile (see CacheDirs).
	Cache []string `json:"cache,omitempty"`
}

// Validate refuses an unknown profile name (fail closed).
func (p Profile) Validate() error {
	switch p.Profile {
	case ReadOnly, WorkspaceWrite:
		return nil
	case "":
		return fmt.Errorf("the plan has no sandbox profile")
	}
	return fmt.Errorf("unknown sandbox profile %q (want %s or %s)", p.Profile, ReadOnly, WorkspaceWrite)
}

// CacheDirs are the profile's cache directories ("~/…") as paths relative
// to the execution's private HOME, which the host knows (and makes them
// in); an entry that is not "~/" and a local path is no cache directory and
// left out.
func (p Profile) CacheDirs() []string {
	var out []string
	for _, c := range p.Cache {
		rest, ok := strings.CutPrefix(c, "~/")
		if !ok || !filepath.IsLocal(rest) {
			continue
		}
		out = append(out, filepath.Clean(rest))
	}
	return out
}

// Equal says whether p and q confine alike: the same fields, an empty list
// equal to none (a grant compares a fresh decision's profile with the one
// it was made for).
func (p Profile) Equal(q Profile) bool {
	return reflect.DeepEqual(p.normal(), q.normal())
}

func (p Profile) normal() Profile {
	for _, l := range []*[]string{&p.Exec, &p.Read, &p.Write, &p.Cache} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return p
}
