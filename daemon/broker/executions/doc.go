// Package executions holds the parts of starting and running an execution
// that need no broker state: who it runs as (CredentialFor), whether its
// plan went stale since it was decided (Stale), what its private TMPDIR
// receives (the git identity, credentials, stdin: files owned by the
// command's user, written O_EXCL|O_NOFOLLOW), the redaction forms of a
// credential's value, its time-limit message, and its live output
// (LiveStream: redacted, coalesced events).
//
// The broker builds each execution's runner spec from these. Imports:
// daemon/config, daemon/credentials, daemon/errdefs, daemon/policy,
// daemon/receiptstore and the API's and receipt's types; never
// daemon/broker nor a sibling noun package.
package executions
