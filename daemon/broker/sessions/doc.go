// Package sessions owns termd's sessions (docs/ARCHITECTURE.md, "Sessions"):
// the session record (Session: owner, label, activity, its plans, the
// executions of it still running), the registry of them (Registry: the
// per-principal and global caps, which idle session makes room at the
// per-principal cap, which sessions the idle timeout expires, what a
// caller may see, the session a new plan goes into), a session's API form
// (Session.Proto), the per-principal event-stream caps (Streams) and
// following a session's events (Stream), and the listing rules of
// ListExecutions (CheckList, Select).
//
// A session holds the broker's executions without knowing them: Session is
// generic over its running executions (Exec: an id and a start time). The
// broker keeps what closing a session does to plans, executions, the
// journal and the event bus, and calls this package through its exported
// methods; the plan states the reap decision needs come in as a function.
//
// Locking: nothing here takes a lock. The broker guards its Registry, every
// Session and its Streams with its mutex (Broker.mu) and calls these
// methods with it held; Stream and Follow are called without it (they
// block), and the visible and ends functions the broker passes them take
// the mutex themselves, from the subscriber's goroutine (events.Bus calls
// visible outside the bus lock).
//
// It may import daemon/domain and lower packages (errdefs, events, the
// proto), never daemon/broker nor another of the broker's noun packages.
package sessions
