// Package domain holds what every part of termd's broker shares, as plain
// Go: who a principal is and what it may see or act on (principal.go), and
// the plan state machine and the execution states (state.go: PlanState, its
// transition table, ExecState, the end state of a run's status, and the one
// conversion of each to and from the API's enum). As the broker is split by
// noun, the plain Go types of plans and executions join them here.
//
// It imports no other daemon package (only the API's generated types,
// package receipt and internal/policyjson, the home of the sandbox Profile
// that clients print too), so every broker part may import it.
package domain
