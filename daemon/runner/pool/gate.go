package pool

import (
	"sync"
	"time"
)

// Size is how many of each a pool keeps ready.
const Size = 4

// nice lowers the filler threads' priority: refilling must not compete
// with the spawn it refills for.
const nice = 10

// YoungRun is how long a running execution holds the refill back at most
// (see Gate): the start of a short command is what a refill would slow, and
// a long one must not starve the pools. (The runner's tests set another.)
const YoungRun = 20 * time.Millisecond

// Gate holds the pools' refill back while an execution is starting or
// young: from its spawn until its result was delivered (Process.Delivered:
// the daemon committed its receipt) or it has run for YoungRun. A refill
// forks a launcher and makes a cgroup and a namespace; on a busy machine,
// done while the command ran it competed with the very command it refilled
// for (the run stage of /bin/true grew by about what the pools saved at
// spawn), and done at the command's exit, with its receipt. The fillers
// check Quiet before each item they make and stop when it is not; the
// execution that makes the gate quiet again kicks them. A pool that runs
// empty meanwhile means spawns make their own, as without a pool.
type Gate struct {
	mu   sync.Mutex
	busy int
}

// Hold counts one execution starting.
func (g *Gate) Hold() {
	g.mu.Lock()
	g.busy++
	g.mu.Unlock()
}

// Release ends one Hold; quiet: it was the last one (kick the fillers).
func (g *Gate) Release() (quiet bool) {
	g.mu.Lock()
	g.busy--
	quiet = g.busy == 0
	g.mu.Unlock()
	return quiet
}

// Quiet: no execution is starting or young, the fillers may work.
func (g *Gate) Quiet() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy == 0
}
