// Package executions holds the parts of starting, running and reading an
// execution that need no broker state. Launches.Spec builds the runner's
// description of an execution from its fresh decision: who it runs as
// (RunAs, CredentialFor), its network (joined by the broker through
// Start.Network), its HOME and sandbox with a private TMPDIR (HiddenPaths,
// RootMap), its environment and what its private TMPDIR receives (the git
// identity, credentials, stdin: files owned by the command's user, written
// O_EXCL|O_NOFOLLOW), filling its Setup, which the broker keeps with the
// execution; its live output (LiveStream: redacted, coalesced events). Also:
// the sandbox mode and what the receipt records of it (ReceiptSandbox),
// whether a plan went stale since it was decided (Stale), the credentials a
// caller may ask for (CredentialScopes, ListCredentials) and the redaction
// forms of their values, the time-limit message, pause/resume/cancel on a
// running process (Control) and output reads (ReadOutput).
//
// Imports daemon/domain, daemon/config, daemon/credentials, daemon/errdefs,
// daemon/events, daemon/policy, daemon/receiptstore, daemon/runner,
// daemon/sandbox (and its launcher protocol), internal/safefs, and the API's
// and receipt's types; never daemon/broker nor a sibling noun package: the
// host file system part comes through the Files interface.
package executions
