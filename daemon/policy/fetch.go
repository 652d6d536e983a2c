package policy

import (
	"slices"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/internal/netmode"
)

// RegistryAllowList is the egress allow-list a package-registry fetch gets
// (npm install, npm ci, go mod download) when its request names no network:
// the built-in list of the npm, Go module, PyPI and crates registries, or
// the operator's list of that name (docs/POLICY.md, "Package fetches").
const RegistryAllowList = "registries"

// fetchNetwork is the network a command asks for, with a package fetch
// that asked for none given egress:registries when the daemon runs the
// egress proxy with that list (ctx.egressLists names it).
func fetchNetwork(asked string, pc *grammar.Parsed, ctx *toolspec.DecideCtx) string {
	if asked == "" && pc.Fetch && slices.Contains(ctx.EgressLists, RegistryAllowList) {
		return netmode.Egress + RegistryAllowList
	}
	return asked
}

// fetchContained: a package fetch under a fully enforced sandbox whose only
// network is the registries allow-list through termd's proxy. What it
// downloads is then held like offline project code: install scripts (npm
// runs them; they are not disabled) run in the same workspace-write
// sandbox, write only in the workspace and the private HOME's caches, and
// reach only the registries. In confirm mode it runs without approval.
func (c *command) fetchContained() bool {
	d := c.d
	return c.ctx.Sandbox && c.pc.Fetch && c.netMode == netmode.Egress+RegistryAllowList &&
		len(d.Sandbox.Write) == 0 && len(d.Sandbox.Read) == 0 && d.RunAs == "" && !d.Privileged
}
