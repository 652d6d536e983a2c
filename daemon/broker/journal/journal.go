// Package journal is termd's durable plan journal, state_dir/plans.jsonl:
// the file, its record format (plans and sessions written directly as
// protojson, protoenc.go), replaying it at start, appending to it,
// compacting it, and the fsync discipline that makes a change durable
// before its caller is answered; and, at start, what replay restores:
// the live sessions (LiveSessions) and each plan decoded and settled in
// the state the receipt store proves (Restorer). Which records to write,
// and the sessions, plans and grants themselves, are the broker's: it
// hands the journal its plans and sessions to encode, and takes restored
// ones back.
//
// It may import daemon/domain (plan states), daemon/policy (the request
// and decision in plan records), daemon/receiptstore and receipt (what
// ran, read at start), the generated proto and the standard library; never
// daemon/broker nor a sibling package under it.
package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Journal makes sessions, plans and approvals survive a crash: every
// change is appended before the caller is answered, and replayed at start.
// The latest record of each id wins. The file is compacted (rewritten with
// one record per live session, plan and grant) at start and, while termd
// runs, whenever superseded and forgotten records outweigh the live ones
// (Due), so it stays within about twice its live size.
//
// Records are written under the broker's mutex (so their order is the order
// of the changes) but never fsync'd there: a change that must be durable
// raises want, and the broker's unlock fsyncs up to it (Sync) after
// releasing the mutex (one fsync serves every caller waiting at that
// moment). Records of an allowed plan, and of starts and ends, are lazy:
// the intent and the receipt in the receipt store are their durable word.
type Journal struct {
	path    string
	written atomic.Int64 // bytes appended (a position that only grows, across compactions)
	want    atomic.Int64 // bytes that must be durable before the callers who wrote them are answered

	syncMu sync.Mutex
	synced atomic.Int64 // bytes known durable

	// fmu guards the file (a compaction swaps it), size, dead, failedAt
	// and the sizes the journal keeps for its callers (the slots and uses
	// of Append, Forget and Load); it is taken after the broker's mutex,
	// never before it.
	fmu  sync.Mutex
	f    *os.File
	size int64 // bytes in the current file
	dead int64 // bytes of records superseded by a later one or forgotten
	// compactions counts the rewrites while termd ran (not the one at start).
	compactions int
	// failedAt is when a compaction last failed (the next waits a minute).
	failedAt time.Time

	// Stall, when set, is called at named points of the journal's work
	// ("compact": the compacted file is durable and not yet renamed over
	// the journal) so that a test can kill termd there.
	Stall func(point string)
}

// New is the journal at path. It has no file open until the first Compact
// (the broker compacts right after replaying what the file holds).
func New(path string) *Journal { return &Journal{path: path} }

// Sync makes every record that must be durable so (see Journal).
func (j *Journal) Sync() error { return j.syncTo(j.want.Load()) }

// syncTo makes the first n bytes durable, unless an fsync already did.
func (j *Journal) syncTo(n int64) error {
	if j.synced.Load() >= n {
		return nil
	}
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.synced.Load() >= n {
		return nil // another caller's fsync covered ours
	}
	j.fmu.Lock()
	f, w := j.f, j.written.Load()
	j.fmu.Unlock()
	if err := f.Sync(); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return nil // closed by Close or replaced by a compaction, each synced first
		}
		return fmt.Errorf("syncing the plan journal: %w", err)
	}
	j.synced.Store(max(j.synced.Load(), w))
	return nil
}

// Emit writes one record (newline included) into a compacted journal;
// *slot takes its size (see Append).
type Emit func(line []byte, slot *int64) error

// Compact rewrites the journal with the records write emits (one per live
// session, plan and grant): into a new file, fsync'd, renamed over the old
// one, and the directory fsync'd, so a crash at any point leaves either the
// old journal or the new one, each whole. write runs with the journal's
// lock held, so the sizes it records are the ones Append and Load see.
func (j *Journal) Compact(write func(emit Emit) error) error {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("compacting the plan journal: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("compacting the plan journal: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var size int64
	emit := func(line []byte, slot *int64) error {
		if _, err := w.Write(line); err != nil {
			return err
		}
		size += int64(len(line))
		*slot = int64(len(line))
		return nil
	}
	if err := write(emit); err != nil {
		return fail(err)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if j.Stall != nil {
		j.Stall("compact")
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return fail(err)
	}
	if d, err := os.Open(filepath.Dir(j.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	if j.f != nil {
		_ = j.f.Close()
		j.compactions++
	}
	j.f, j.size, j.dead = f, size, 0
	// Everything recorded so far is in the new file, durable.
	n := j.written.Load()
	j.synced.Store(n)
	j.want.Store(n)
	return nil
}

// compactMinDead is the dead bytes below which the journal is not
// rewritten while termd runs, however small its live part.
const compactMinDead = 4 << 20

// Due says whether the journal should be compacted: its dead records
// (superseded or forgotten) outweigh its live ones and pass
// compactMinDead, and no compaction failed in the last minute.
func (j *Journal) Due() bool {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	return j.dead >= compactMinDead && j.dead > j.size-j.dead && time.Since(j.failedAt) > time.Minute
}

// CompactFailed notes a failed compaction: the next is tried in a minute.
func (j *Journal) CompactFailed() {
	j.fmu.Lock()
	j.failedAt = time.Now()
	j.fmu.Unlock()
}

// Stats is the journal's size, the part of it that is dead, and the
// compactions while termd ran, for status and metrics.
func (j *Journal) Stats() (size, dead int64, compactions int) {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	return j.size, j.dead, j.compactions
}

// AppendRecord appends a record; sync=false leaves it to the next synced
// write (used where another durable record already covers a crash).
// Durable records are fsync'd by the next Sync. slot is as in Append.
func (j *Journal) AppendRecord(r Record, sync bool, slot *int64) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return j.Append(append(data, '\n'), sync, slot, nil, nil)
}

// Append appends one encoded record, newline included. The record
// supersedes the one of the same id whose size *slot holds: that one
// becomes dead, and *slot (and *use, a principal's journal bytes) take the
// new size. A record of something forgotten (gone set) is not written.
func (j *Journal) Append(data []byte, sync bool, slot, use *int64, gone *bool) error {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	if gone != nil && *gone {
		return nil
	}
	if _, err := j.f.Write(data); err != nil {
		return fmt.Errorf("writing the plan journal: %w", err)
	}
	l := int64(len(data))
	j.size += l
	if slot != nil {
		j.dead += *slot
		if use != nil {
			*use += l - *slot
		}
		*slot = l
	}
	n := j.written.Add(l)
	if sync {
		j.want.Store(n)
	}
	return nil
}

// Forget marks something forgotten (*gone): its current record (*slot
// bytes, counted in *use) is dead from now on, gone at the next compaction,
// and no later record of it is written.
func (j *Journal) Forget(slot, use *int64, gone *bool) {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	j.dead += *slot
	*use -= *slot
	*slot = 0
	*gone = true
}

// Load reads a size the journal keeps (a use of Append) under its lock.
func (j *Journal) Load(p *int64) int64 {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	return *p
}

// Close syncs and closes the journal's file.
func (j *Journal) Close() {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	if j.f != nil {
		_ = j.f.Sync()
		_ = j.f.Close()
	}
}
