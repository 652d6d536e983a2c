// Package terminals owns termd's PTY terminals (docs/TERMINALS.md): for each
// PTY execution a Hub with the screen rendered from its output, the clients
// attached to it, who holds its input, and every input, which becomes a
// TERMINAL event and part of the receipt; and the terminal calls (send
// input and wait for readiness, take and release the input, resize, read
// the screen, attach).
//
// The broker creates a Hub when it spawns a PTY execution, feeds it the
// output, and ends it with the execution; it finds executions, their owners
// and the session's event stream for the terminals through Host, and says
// what a hub's execution is through Exec.
//
// It may import daemon/domain and lower packages (errdefs, events, policy,
// receiptstore, runner, internal/…, the proto and receipt packages), never
// daemon/broker nor another of the broker's noun packages.
package terminals
