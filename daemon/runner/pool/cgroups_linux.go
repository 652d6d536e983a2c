package pool

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/termd/termd/daemon/runner/cgroup"
	"github.com/termd/termd/daemon/runner/proctree"
)

// Cgroups keeps per-execution cgroups made ahead: the v2 directory and,
// on hybrid hosts, the v1 pids and memory directories, with the limits of the
// latest execution written (an execution with other limits rewrites them
// when it takes one). Their names, p-<daemon pid>-<its start ticks>-<n>, say
// which daemon made them, so a daemon that starts after a crash can remove
// its predecessor's (Stale).
type Cgroups struct {
	tree   *cgroup.Tree
	quiet  func() bool // may fill now (Gate.Quiet)
	prefix string
	seq    atomic.Uint64
	ready  chan *cgroup.Cgroup
	last   atomic.Pointer[cgroup.Limits] // limits written ahead
	kick   chan struct{}                 // the refill gate became quiet: refill
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	reserved map[string]*cgroup.Cgroup // execution id -> its cgroup (nil: made at spawn)
	closed   bool
	// made, reused: cgroups made, and handed back by Recycle to serve again.
	made, reused atomic.Uint64
}

// cgroupsKept bounds the cgroups ready: fresh ones are made up to Size,
// recycled ones kept up to this many, so that one an ended execution hands
// back is not turned away because the filler replaced meanwhile the one a
// pre-started launcher took (ForLauncher), which left the next made and
// removed per execution as without recycling; and so that the pool grows
// to the executions in flight together (Reserve makes one when it is
// empty): with 2*Size, 32 clients' executions beyond it each made and
// removed a cgroup (7% of termd's CPU at 32 clients, and the kernel's
// teardown of a memory cgroup besides).
const cgroupsKept = 8 * Size

// Prefix begins the name of every pooled cgroup.
const Prefix = "p-"

// NewCgroups starts a pool of cgroups under tree's parents for the daemon
// self, filled while quiet says so.
func NewCgroups(tree *cgroup.Tree, self int, quiet func() bool) *Cgroups {
	start := uint64(0)
	if pi, ok := proctree.Read(self); ok {
		start = pi.Start
	}
	cp := &Cgroups{
		tree:     tree,
		quiet:    quiet,
		prefix:   fmt.Sprintf("%s%d-%d-", Prefix, self, start),
		ready:    make(chan *cgroup.Cgroup, cgroupsKept),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		reserved: map[string]*cgroup.Cgroup{},
	}
	go cp.fill()
	return cp
}

// fill fills the pool at start and when the refill gate is quiet (see
// NetNS.fill).
func (cp *Cgroups) fill() {
	defer close(cp.done)
	for {
		for len(cp.ready) < Size && cp.quiet() {
			select {
			case <-cp.stop:
				return
			default:
			}
			cg, err := cp.Make(false)
			if err != nil {
				break // spawns make their cgroups inline meanwhile; try again later
			}
			select {
			case cp.ready <- cg:
			default: // recycled ones (Recycle) took the room meanwhile
				cg.Remove()
			}
		}
		select {
		case <-cp.kick:
		case <-time.After(time.Second):
		case <-cp.stop:
			return
		}
	}
}

// Refill asks the filler to top the pool up.
func (cp *Cgroups) Refill() {
	if cp != nil {
		select {
		case cp.kick <- struct{}{}:
		default:
		}
	}
}

// Make makes a cgroup with the latest limits; joined: for a process that
// joins its v1 cgroups after its fork (cgroup.Cgroup.JoinV1).
func (cp *Cgroups) Make(joined bool) (*cgroup.Cgroup, error) {
	cg, err := cp.tree.Make(cp.prefix+strconv.FormatUint(cp.seq.Add(1), 10), joined)
	if err != nil {
		return nil, err
	}
	cp.made.Add(1)
	if last := cp.last.Load(); last != nil {
		if err := cp.tree.ApplyLimits(cg, *last); err != nil {
			cg.Remove()
			return nil, err
		}
	}
	return cg, nil
}

// Recycle takes back the cgroup of an ended execution (after its result:
// every process of it is dead and reaped, see cgroup.Cgroup.Reset) to serve
// the next one, which saves making and removing three directories and
// writing its limits; false: the caller removes it (it was not one of the
// pool's, or something of its execution is left in it, or the pool is full
// or closed).
func (cp *Cgroups) Recycle(cg *cgroup.Cgroup) bool {
	if cp == nil || !strings.HasPrefix(filepath.Base(cg.Path()), cp.prefix) || len(cp.ready) == cap(cp.ready) || !cg.Reset() {
		return false
	}
	cp.mu.Lock()
	defer cp.mu.Unlock() // Close drains ready after it set closed under mu
	if cp.closed {
		return false
	}
	select {
	case cp.ready <- cg:
		cp.reused.Add(1)
		return true
	default: // filled meanwhile
		return false
	}
}

// ForLauncher is a cgroup for a pre-started launcher, which joins its v1
// cgroups after its fork: a recycled one when there is one, else made now.
func (cp *Cgroups) ForLauncher() (*cgroup.Cgroup, error) {
	if cg := cp.take(); cg != nil {
		cg.MarkJoined()
		return cg, nil
	}
	return cp.Make(true)
}

func (cp *Cgroups) take() *cgroup.Cgroup {
	select {
	case cg := <-cp.ready:
		return cg
	default:
		return nil
	}
}

// Reserve hands the execution id a cgroup now, so its path can go into the
// durable intent before the spawn. When the pool is empty (more executions
// in flight than it held) it makes one now, in the pool's name, which the
// execution's end hands back (Recycle): the pool grows to the load instead
// of a cgroup made and removed per execution beyond it. nil when that fails
// (the spawn then makes x-<id> as without a pool).
func (cp *Cgroups) Reserve(id string) *cgroup.Cgroup {
	cp.mu.Lock()
	if cg, ok := cp.reserved[id]; ok || cp.closed {
		cp.mu.Unlock()
		return cg
	}
	cg := cp.take()
	if cg != nil {
		cp.reserved[id] = cg
		cp.mu.Unlock()
		return cg
	}
	cp.mu.Unlock()
	cg, err := cp.Make(false) // off the lock: other executions take and reserve meanwhile
	if err != nil {
		cg = nil
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if prev, ok := cp.reserved[id]; ok || cp.closed {
		if cg != nil {
			cg.Remove() // reserved meanwhile by another call, or the pool closed
		}
		return prev
	}
	cp.reserved[id] = cg
	return cg
}

// Claim is the cgroup for an execution starting now: its reservation, or
// one from the pool; ok is false when there is none (make it inline).
func (cp *Cgroups) Claim(id string, lim cgroup.Limits) (cg *cgroup.Cgroup, ok bool) {
	if cp == nil {
		return nil, false
	}
	cp.mu.Lock()
	cg, reserved := cp.reserved[id]
	delete(cp.reserved, id)
	cp.mu.Unlock()
	if !reserved {
		cg = cp.take()
	}
	if cg == nil {
		return nil, false
	}
	if last := cp.last.Load(); last == nil || *last != lim {
		cp.last.Store(&lim)
	}
	return cg, true
}

// Close stops the filler and removes every cgroup the pool holds.
func (cp *Cgroups) Close() {
	if cp == nil {
		return
	}
	cp.mu.Lock()
	if cp.closed {
		cp.mu.Unlock()
		return
	}
	cp.closed = true
	cp.mu.Unlock()
	close(cp.stop)
	<-cp.done
	cp.mu.Lock()
	for id, cg := range cp.reserved {
		if cg != nil {
			cg.Remove()
		}
		delete(cp.reserved, id)
	}
	cp.mu.Unlock()
	for {
		select {
		case cg := <-cp.ready:
			cg.Remove()
		default:
			return
		}
	}
}

// Stale: name is a pooled cgroup's whose daemon (pid and start time) is
// gone.
func Stale(name string) bool {
	rest, ok := strings.CutPrefix(name, Prefix)
	f := strings.Split(rest, "-")
	if !ok || len(f) != 3 {
		return false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	pi, alive := proctree.Read(pid)
	return !alive || pi.Start != start
}

// Ready is how many cgroups are ready.
func (cp *Cgroups) Ready() int { return len(cp.ready) }

// Status says what the pool holds (tests print it).
func (cp *Cgroups) Status() string {
	if cp == nil {
		return "cgroups: made at spawn"
	}
	return fmt.Sprintf("cgroups: %d ready (%d made, %d reused)", len(cp.ready), cp.made.Load(), cp.reused.Load())
}
