package domain

import "github.com/termd/termd/internal/policyjson"

// Sandbox profile names (docs/SANDBOX.md; policyjson.ReadOnly and
// policyjson.WorkspaceWrite).
const (
	ReadOnly       = policyjson.ReadOnly
	WorkspaceWrite = policyjson.WorkspaceWrite
)

// Profile is how the kernel confines a plan's execution: the one type the
// policy decides (its decision carries it), the sandbox enforces, and the
// API (broker/wire: SandboxProto), the receipt (executions.ReceiptSandbox,
// from what sandbox.Prepare enforced) and `termctl policy check` are
// derived from. It lives in internal/policyjson
// so that clients print the daemon's own type (they link no daemon
// package); its JSON form is hashed and journaled, and must not change.
type Profile = policyjson.Profile
