package runner

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/cgroup"
	"github.com/termd/termd/daemon/runner/proctree"
)

// orphanReaper shares one /proc scan among the executions ending at the same
// time. Every ending execution must reap the zombies of its orphans (they are
// re-parented to us as subreaper, see EnableSubreaper) before its result, and
// finding them takes a scan of /proc; with many sessions at once the peek
// before it (hasZombieChild) is nearly always positive, because some other
// execution's main process is a zombie at that moment, and a scan per
// execution was a quarter of the daemon's CPU. Like the receipt store's group
// commit, executions queue for the next scan, one goroutine scans for all of
// them, and each returns once a scan started after it queued has reaped what
// was its own.
type orphanReaper struct {
	mu      sync.Mutex
	waiting []*Process
	next    chan struct{} // closed when the scan serving waiting is done
	running bool
}

// reapFor returns after one /proc scan that began after p queued has reaped
// p's orphan zombies.
func (r *Runner) reapFor(p *Process) {
	g := &r.reaper
	g.mu.Lock()
	if g.next == nil {
		g.next = make(chan struct{})
	}
	g.waiting = append(g.waiting, p)
	done := g.next
	if !g.running {
		g.running = true
		go r.reapLoop()
	}
	g.mu.Unlock()
	<-done
}

func (r *Runner) reapLoop() {
	g := &r.reaper
	for {
		g.mu.Lock()
		batch, done := g.waiting, g.next
		if len(batch) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.waiting, g.next = nil, make(chan struct{})
		g.mu.Unlock()
		r.reapBatch(batch)
		close(done)
	}
}

// reapBatch reaps, one pid at a time and never "any child", each zombie child
// of ours that one of batch's executions left: a process it tracked (same pid
// and start time) or one whose cgroup was its cgroup.
func (r *Runner) reapBatch(batch []*Process) {
	type owner struct {
		tracked map[int]uint64
		main    int
	}
	owners := make([]owner, 0, len(batch))
	cgNames := map[string]bool{}
	for _, p := range batch {
		p.mu.Lock()
		tracked := make(map[int]uint64, len(p.tracked))
		for k, v := range p.tracked {
			tracked[k] = v
		}
		owners = append(owners, owner{tracked: tracked, main: p.pid})
		p.mu.Unlock()
		if p.cg != nil {
			cgNames[r.tree.ParentRel+"/"+p.name] = true
		}
	}
	for pid, pi := range proctree.Snapshot() {
		if pi.PPid != r.self || pi.State != 'Z' || r.isMain(pid, pi.Start) {
			continue
		}
		ours := false
		for _, o := range owners {
			if pid != o.main && pi.Start != 0 && o.tracked[pid] == pi.Start {
				ours = true
				break
			}
		}
		if !ours && len(cgNames) > 0 {
			if cgs, ok := cgroup.Of(pid); ok && cgNames[cgs.V2] {
				ours = true
			}
		}
		if ours {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}
