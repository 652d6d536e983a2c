package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Each execution's private TMPDIR (<home base>/.tmp/<execution>) is a
// directory made ahead. Making one on the spot was ~0.2 ms of CPU in termd's
// profile of plan+execute pairs, on the critical path before the intent (a
// directory's inode and block, journalled, often behind the previous
// execution's removal); renaming a directory made ahead costs about a tenth.
// So, as the runner keeps network namespaces and cgroups made ahead, the
// broker keeps a few empty directories beside the executions' (tmpSpareCount,
// named .spare-<termd pid>-<n>, 0700 and owned by termd, like a new one
// before its chown). One is taken, renamed (never over an existing name) to
// the execution's and given to its user exactly as a new one. A spare that
// cannot be taken is removed and the directory made as before.
//
// Making and removing a directory per execution still cost termd more CPU
// than anything else it did between executions (ext4 skips the inodes freed
// in the last minutes when it allocates one, reading each). So an ended
// execution's TMPDIR goes back to the spares, emptied, when nothing can
// still reach it (recycleTmp): its spare then serves only its own user's
// executions. Spares are made (between executions, after a receipt) only
// when there are fewer than tmpSpareCount.
const tmpSpareCount = 4

const spareTag = ".spare-"

// fresh is the owner of a spare termd made: any user's execution may take it.
const fresh = -1

type spareDir struct {
	dir string
	uid int // the user whose execution it was, or fresh
}

type tmpSpares struct {
	mu      sync.Mutex
	dirs    []spareDir
	n       int
	filling bool
	closed  bool
}

// take returns a spare directory for uid's execution (one that was uid's
// before, else a fresh one), or "" when there is none.
func (t *tmpSpares) take(uid int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.dirs, func(s spareDir) bool { return s.uid == uid })
	if i < 0 {
		i = slices.IndexFunc(t.dirs, func(s spareDir) bool { return s.uid == fresh })
	}
	if i < 0 {
		return ""
	}
	d := t.dirs[i].dir
	t.dirs = slices.Delete(t.dirs, i, i+1)
	return d
}

// add keeps dir as a spare for uid unless there are enough or termd is
// shutting down.
func (t *tmpSpares) add(dir string, uid int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.dirs) >= tmpSpareCount {
		return false
	}
	t.dirs = append(t.dirs, spareDir{dir, uid})
	return true
}

// name is a new spare's path in base.
func (t *tmpSpares) name(base string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	return filepath.Join(base, fmt.Sprintf("%s%d-%d", spareTag, os.Getpid(), t.n))
}

// makeTmp makes dir, an execution's TMPDIR in base for uid, from a spare
// when one can be taken.
func (b *Broker) makeTmp(dir string, uid int) error {
	if sp := b.tmpSpares.take(uid); sp != "" {
		if err := renameNoReplace(sp, dir); err == nil {
			return nil
		}
		_ = os.RemoveAll(sp)
	}
	return os.Mkdir(dir, 0o700)
}

// releaseTmp removes an ended execution's TMPDIR (everything the command
// left in it), or empties it back into the spares when contained (the
// execution's cgroup was empty at its end) and recycleTmp finds nothing
// unusual.
//
// Contained rules out everything but a process that could leave its cgroup
// (as root, or as the user termd runs as when termd is not root), and one
// that a process outside the execution started for the command (a user's
// service manager): such processes can reach any TMPDIR of their user by
// its path already; a recycled one differs from a fresh one only for a
// descriptor they hold on it, so it goes to no other user (a descriptor
// opened before could still list its names). A Landlock-confined process,
// whose rules bind to the directory's inode, cannot leave its cgroup: the
// sandbox never lets it write to cgroupfs.
func (b *Broker) releaseTmp(dir string, uid, gid int, contained bool) {
	if contained {
		sp := b.tmpSpares.name(filepath.Dir(dir))
		if recycleTmp(dir, sp, uid, gid) == nil {
			if b.tmpSpares.add(sp, uid) {
				return
			}
			dir = sp
		}
	}
	_ = os.RemoveAll(dir)
}

// refillTmp makes spares until there are tmpSpareCount of them (one filler
// at a time; after Shutdown, none).
func (b *Broker) refillTmp() {
	t := &b.tmpSpares
	t.mu.Lock()
	if t.filling || t.closed {
		t.mu.Unlock()
		return
	}
	t.filling = true
	t.mu.Unlock()
	base := filepath.Join(b.homeBase(), ".tmp")
	defer func() {
		t.mu.Lock()
		t.filling = false
		t.mu.Unlock()
	}()
	for {
		t.mu.Lock()
		full := t.closed || len(t.dirs) >= tmpSpareCount
		t.mu.Unlock()
		if full {
			return
		}
		dir := t.name(base)
		if err := os.Mkdir(dir, 0o700); err != nil {
			return
		}
		if !t.add(dir, fresh) {
			_ = os.Remove(dir) // filled by a recycled one, or shut down meanwhile
			return
		}
	}
}

// closeTmpSpares removes the spares (termd is shutting down).
func (b *Broker) closeTmpSpares() {
	t := &b.tmpSpares
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, d := range t.dirs {
		_ = os.Remove(d.dir)
	}
	t.dirs = nil
}

// removeStaleSpares removes spares left by a termd that is gone (a crash),
// or by an earlier one with this pid, at start.
func (b *Broker) removeStaleSpares() {
	base := filepath.Join(b.homeBase(), ".tmp")
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, ent := range ents {
		rest, ok := strings.CutPrefix(ent.Name(), spareTag)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		if pid == os.Getpid() || errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = os.RemoveAll(filepath.Join(base, ent.Name()))
		}
	}
}
