// Package search owns the full-text index over receipts: a derived,
// disposable SQLite FTS5 file (search.db in the state directory) that follows
// the receipt chain and is never part of it. Nothing here writes to the
// receipt store; a missing, corrupt or stale index is rebuilt from the
// receipts. Who may see which hit is decided by the broker, not here.
package search

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/receipt"
	_ "modernc.org/sqlite" // registers the "sqlite" driver (built with FTS5)
)

// schemaVersion changes when what is indexed changes; an index of another
// version is rebuilt at open.
const schemaVersion = "1"

// The trigram tokenizer indexes every three characters, so any substring of
// three or more characters (punctuation included: `--force`, `a OR b`) can
// be found; case is folded.
const indexSchema = `
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
	seq        INTEGER PRIMARY KEY,
	id         TEXT    NOT NULL,
	hash       TEXT    NOT NULL,
	session_id TEXT    NOT NULL,
	requester  TEXT    NOT NULL,
	approver   TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	started_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_session   ON docs(session_id, seq);
CREATE INDEX IF NOT EXISTS docs_requester ON docs(requester, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(command, reasons, output, tokenize='trigram');
`

// batch is how many receipts one catch-up transaction indexes; the lock is
// released between batches so a search is never held up for long.
const batch = 256

// Index is the search index of one receipt store.
type Index struct {
	path  string
	store *receiptstore.Store
	log   *slog.Logger

	mu sync.Mutex // one catch-up, rebuild or reopen at a time
	db *sql.DB    // nil when the file could not be opened

	wake   chan struct{}
	rounds atomic.Int64       // background catch-ups so far
	size   atomic.Int64       // Bytes
	stop   context.CancelFunc // ends the follower, between batches
	ctx    context.Context
	done   chan struct{}
}

// Open opens (or creates) the index at path and starts following store in
// the background: it catches up at once and after every commit. A file
// that cannot be read as an index is removed and built again.
func Open(path string, store *receiptstore.Store, log *slog.Logger) *Index {
	x := &Index{path: path, store: store, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	x.ctx, x.stop = context.WithCancel(context.Background())
	x.mu.Lock()
	if err := x.openLocked(); err != nil {
		log.Warn("search index: cannot open it; rebuilding from the receipts", "path", path, "error", err)
		if err := x.resetLocked(); err != nil {
			log.Error("search index unavailable: searches fail until `termctl receipts reindex` succeeds", "path", path, "error", err)
		}
	}
	x.mu.Unlock()
	store.OnChange(x.Notify)
	go x.follow()
	x.Notify()
	return x
}

func (x *Index) openLocked() error {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)") // derived data: a lost tail is indexed again
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", receiptstore.CachePragma)
	q.Set("_txlock", "immediate")
	// Created 0600 before SQLite opens it: the index holds redacted
	// output, which is no one else's business.
	f, err := os.OpenFile(x.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	if err := os.Chmod(x.path, 0o600); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", "file:"+x.path+"?"+q.Encode())
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(2)
	var check string
	if err := db.QueryRow(`PRAGMA quick_check`).Scan(&check); err != nil || check != "ok" {
		db.Close()
		return fmt.Errorf("quick_check: %q %v", check, err)
	}
	if _, err := db.Exec(indexSchema); err != nil {
		db.Close()
		return err
	}
	var v string
	err = db.QueryRow(`SELECT v FROM meta WHERE k = 'version'`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM docs`).Scan(&n); err != nil || n != 0 {
			db.Close()
			return fmt.Errorf("index without a version (%d documents, %v)", n, err)
		}
		if _, err := db.Exec(`INSERT INTO meta(k, v) VALUES ('version', ?)`, schemaVersion); err != nil {
			db.Close()
			return err
		}
	case err != nil:
		db.Close()
		return err
	case v != schemaVersion:
		db.Close()
		return fmt.Errorf("index version %q, want %q", v, schemaVersion)
	}
	x.db = db
	x.measureLocked()
	return nil
}

// resetLocked removes the index file and starts an empty one.
func (x *Index) resetLocked() error {
	if x.db != nil {
		x.db.Close()
		x.db = nil
	}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if err := os.Remove(x.path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return x.openLocked()
}

// Notify asks the background follower to catch up. It never blocks (the
// receipt store calls it from its writer).
func (x *Index) Notify() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// settle and maxDelay batch the background catch-up: after a commit the
// follower waits until no commit has come for settle, or maxDelay has passed
// since the first, and then indexes everything new at once. Catching up
// after every commit cost termd ~8% of its CPU per execution while commands
// ran back to back (the index's own reads and transaction per wake); a
// search still catches up first, so it never misses a receipt.
const (
	settle   = 250 * time.Millisecond
	maxDelay = 2 * time.Second
)

func (x *Index) follow() {
	defer close(x.done)
	for {
		select {
		case <-x.ctx.Done():
			return
		case <-x.wake:
		}
		if !x.quiet() {
			return
		}
		x.rounds.Add(1)
		if _, err := x.CatchUp(x.ctx, time.Time{}); err != nil {
			x.log.Warn("search index: catching up failed", "error", err)
		}
	}
}

// quiet waits until the commits pause (see settle); false when closing.
func (x *Index) quiet() bool {
	first := time.Now()
	t := time.NewTimer(settle)
	defer t.Stop()
	for {
		select {
		case <-x.ctx.Done():
			return false
		case <-x.wake:
			t.Reset(max(0, min(settle, maxDelay-time.Since(first))))
		case <-t.C:
			return true
		}
	}
}

// Close stops following (a long catch-up stops after its current batch;
// the rest is indexed at the next start) and closes the file.
func (x *Index) Close() error {
	x.stop()
	<-x.done
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.db == nil {
		return nil
	}
	err := x.db.Close()
	x.db = nil
	return err
}

// ErrUnavailable is returned when the index file cannot be used.
var ErrUnavailable = errors.New("the search index is unavailable: run `termctl receipts reindex` (operators) to build it again from the receipts")

// CatchUp brings the index level with the store: receipts pruned from the
// store leave it, new ones are added, batch by batch. With a non-zero
// deadline it stops after the batch that passes it and reports behind=true
// when receipts are left to index. An index that disagrees with the store
// (a receipt's hash differs: the store was replaced) is rebuilt.
func (x *Index) CatchUp(ctx context.Context, deadline time.Time) (behind bool, err error) {
	for {
		more, err := x.step()
		if err != nil || !more {
			return false, err
		}
		if ctx.Err() != nil || (!deadline.IsZero() && time.Now().After(deadline)) {
			return true, nil
		}
	}
}

// step indexes one batch and says whether more is left.
func (x *Index) step() (bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.db == nil {
		return false, ErrUnavailable
	}
	last, lastHash, err := x.lastLocked()
	if err != nil {
		return false, err
	}
	if last > 0 {
		h, err := x.store.HashAt(last)
		if err != nil {
			return false, err
		}
		first, err := x.store.FirstSeq()
		if err != nil {
			return false, err
		}
		// A receipt still kept must be the one indexed; one missing is fine
		// only when a prune removed it (everything up to it is gone too).
		if (h != "" && h != lastHash) || (h == "" && first != 0 && first <= last) {
			x.log.Warn("search index: it does not match the receipt store; rebuilding", "seq", last)
			if err := x.resetLocked(); err != nil {
				return false, err
			}
			return true, nil
		}
		if err := x.dropPrunedLocked(first, last); err != nil {
			return false, err
		}
	}
	rs, err := x.store.After(last, batch)
	if err != nil {
		return false, err
	}
	if len(rs) == 0 {
		return false, nil
	}
	if err := x.addLocked(rs); err != nil {
		return false, err
	}
	return len(rs) == batch, nil
}

func (x *Index) lastLocked() (int64, string, error) {
	var seq int64
	var hash string
	err := x.db.QueryRow(`SELECT seq, hash FROM docs ORDER BY seq DESC LIMIT 1`).Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	return seq, hash, err
}

// dropPrunedLocked removes what the store no longer holds (a prune takes a
// prefix of the chain: everything before its oldest receipt, or all of it).
func (x *Index) dropPrunedLocked(first, last int64) error {
	cut := first
	if first == 0 {
		cut = last + 1
	}
	var n int
	if err := x.db.QueryRow(`SELECT COUNT(*) FROM docs WHERE seq < ?`, cut).Scan(&n); err != nil || n == 0 {
		return err
	}
	tx, err := x.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`DELETE FROM fts WHERE rowid < ?`, cut); err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM docs WHERE seq < ?`, cut); err != nil {
		return err
	}
	err = tx.Commit()
	x.measureLocked()
	return err
}

func (x *Index) addLocked(rs []receiptstore.Stored) error {
	tx, err := x.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, st := range rs {
		r, err := st.Decode()
		if err != nil {
			return fmt.Errorf("seq %d: %w", st.Seq, err)
		}
		approver := ""
		if r.Approver != nil {
			approver = r.Approver.ID
		}
		if _, err := tx.Exec(`INSERT INTO docs(seq, id, hash, session_id, requester, approver, status, started_ns) VALUES (?,?,?,?,?,?,?,?)`,
			st.Seq, r.ID, st.Hash, r.SessionID, r.Requester.ID, approver, string(r.Status), r.StartedAt.UnixNano()); err != nil {
			return err
		}
		f := Fields(r)
		if _, err := tx.Exec(`INSERT INTO fts(rowid, command, reasons, output) VALUES (?,?,?,?)`,
			st.Seq, f[FieldCommand], f[FieldReasons], f[FieldOutput]); err != nil {
			return err
		}
	}
	err = tx.Commit()
	x.measureLocked()
	return err
}

// Rebuild throws the index away and builds it again from every receipt
// the store holds; it returns how many receipts were indexed.
func (x *Index) Rebuild(ctx context.Context) (int64, error) {
	x.mu.Lock()
	err := x.resetLocked()
	x.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("search index %s: %w", x.path, err)
	}
	if _, err := x.CatchUp(ctx, time.Time{}); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return x.Count()
}

// Bytes is the size of what the index holds: its database's pages in use
// (the write-ahead log's included, the free ones not), less those of an
// empty index, as of its last change; the storage budgets count it
// (broker: storage.go). It never waits for a catch-up.
func (x *Index) Bytes() int64 { return x.size.Load() }

// measureLocked updates Bytes after a change.
func (x *Index) measureLocked() {
	if x.db == nil {
		x.size.Store(0)
		return
	}
	var pages, free, size int64
	if err := errors.Join(x.db.QueryRow(`PRAGMA page_count`).Scan(&pages),
		x.db.QueryRow(`PRAGMA freelist_count`).Scan(&free),
		x.db.QueryRow(`PRAGMA page_size`).Scan(&size)); err != nil {
		return
	}
	x.size.Store(max(0, (pages-free)*size-emptyIndexBytes))
}

// emptyIndexBytes is about what an index without documents takes (its
// schema and the FTS5 tables' first pages).
const emptyIndexBytes = 64 << 10

// Count is how many receipts the index holds.
func (x *Index) Count() (int64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.db == nil {
		return 0, ErrUnavailable
	}
	var n int64
	err := x.db.QueryRow(`SELECT COUNT(*) FROM docs`).Scan(&n)
	return n, err
}

// The indexed fields of a receipt.
const (
	FieldCommand = "command"
	FieldReasons = "reasons"
	FieldOutput  = "output"
)

// binaryMarker starts the text a receipt holds instead of binary output.
const binaryMarker = "[binary output not kept in the receipt"

// Fields is what is indexed of a receipt, by field: the command as shown
// (its canonical argv), the decision with its reasons and detail, and the
// redacted output the receipt holds (never more: the receipt is the only
// source). Binary output is not in a receipt, and its marker is not indexed.
func Fields(r *receipt.Receipt) map[string]string {
	reasons := []string{r.Decision, r.Risk}
	reasons = append(reasons, r.Policy.Reasons...)
	if r.Detail != "" {
		reasons = append(reasons, r.Detail)
	}
	var out []string
	for _, s := range []string{r.Stdout, r.Stderr} {
		if s != "" && !strings.HasPrefix(s, binaryMarker) {
			out = append(out, s)
		}
	}
	return map[string]string{
		FieldCommand: r.Command,
		FieldReasons: strings.Join(reasons, "\n"),
		FieldOutput:  strings.Join(out, "\n"),
	}
}
