// Package grants owns remembered approvals. An operator approving a plan
// may let the approval stand for this exact request for the rest of the
// session or, in its workspace, from any session of the principal for a
// bounded time (so it survives an MCP client's restart), or for a pattern
// of requests (`git commit -m <any>`) in the session or the workspace,
// until it expires. A new plan that the policy decides "ask" is approved by
// a grant that covers it: same principal, same session or workspace, a
// request that fits the pattern, and a fresh decision inside the grant's
// binding (program path and hash, policy version, entry files, sandbox
// profile, rules, risk; policy.GrantBinding). The grant is checked again
// when the plan executes. Grants are journalled in the broker's plan
// journal, so they survive a restart; revoking one ends it at once.
//
// The broker holds one Grants and guards it with its own lock: every
// method is called with that lock held. What grants need of the broker
// (clock, configuration, policy, sessions, journal) comes through Host.
//
// It may import daemon/domain and lower packages (config, errdefs, policy,
// internal/…, the proto package), never daemon/broker nor another of the
// broker's noun packages.
package grants
