// Package domain holds what every part of termd's broker shares: who a
// principal is and what it may see or act on, and (as the broker is split
// by noun) the plain Go types of plans, executions and their states. It
// imports no other daemon package, so every broker part may import it.
package domain
