// Package receiptstore is the daemon's side of receipts: the signing keys on
// disk, the redaction that runs before anything is stored or leaves the
// daemon, intents, share export, and the append-only, hash-chained SQLite
// store that keeps receipts durable across crashes. The format itself
// (schema, canonical JSON, signatures) is package receipt.
package receiptstore

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/termd/termd/receipt"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrNotFound is returned by Get and Latest when there is no such receipt.
var ErrNotFound = errors.New("receipt not found")

const storeSchema = `
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS receipts (
	seq          INTEGER PRIMARY KEY,
	id           TEXT    NOT NULL UNIQUE,
	session_id   TEXT    NOT NULL,
	plan_id      TEXT    NOT NULL,
	execution_id TEXT    NOT NULL,
	status       TEXT    NOT NULL,
	requester    TEXT    NOT NULL,
	approver     TEXT    NOT NULL,
	started_ns   INTEGER NOT NULL,
	hash         TEXT    NOT NULL,
	body         BLOB    NOT NULL
);
CREATE INDEX IF NOT EXISTS receipts_session   ON receipts(session_id, seq);
CREATE INDEX IF NOT EXISTS receipts_status    ON receipts(status, seq);
CREATE INDEX IF NOT EXISTS receipts_started   ON receipts(started_ns);
CREATE INDEX IF NOT EXISTS receipts_execution ON receipts(execution_id);
CREATE INDEX IF NOT EXISTS receipts_requester ON receipts(requester);
-- Partial indexes: a receipt's commit writes a page of each index that
-- holds it, and most receipts (an execution's, with no approver) are in
-- neither. Queries on plan_id are for receipts without an execution, and
-- those on approver name one (Filter.query says approver != '').
DROP INDEX IF EXISTS receipts_plan;
DROP INDEX IF EXISTS receipts_approver;
CREATE INDEX IF NOT EXISTS receipts_plan_unexecuted ON receipts(plan_id) WHERE execution_id = '';
CREATE INDEX IF NOT EXISTS receipts_approved_by     ON receipts(approver) WHERE approver != '';
CREATE TRIGGER IF NOT EXISTS receipts_no_update BEFORE UPDATE ON receipts
	BEGIN SELECT RAISE(ABORT, 'receipts are append-only'); END;

CREATE TABLE IF NOT EXISTS intents (
	execution_id TEXT    PRIMARY KEY,
	plan_id      TEXT    NOT NULL,
	session_id   TEXT    NOT NULL,
	started_ns   INTEGER NOT NULL,
	body         BLOB    NOT NULL
);
-- No query looks intents up by plan_id (recovery and prune go from each
-- intent to the receipts): an index on it cost every intent a page.
DROP INDEX IF EXISTS intents_plan;
CREATE TRIGGER IF NOT EXISTS intents_no_update BEFORE UPDATE ON intents
	BEGIN SELECT RAISE(ABORT, 'intents are append-only'); END;

CREATE TABLE IF NOT EXISTS intent_spawns (
	execution_id TEXT    NOT NULL REFERENCES intents(execution_id),
	pid          INTEGER NOT NULL,
	pgid         INTEGER NOT NULL,
	cgroup_path  TEXT    NOT NULL,
	at_ns        INTEGER NOT NULL,
	start_ticks  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS intent_spawns_exec ON intent_spawns(execution_id);

CREATE TABLE IF NOT EXISTS checkpoints (
	head_seq INTEGER PRIMARY KEY,
	hash     TEXT    NOT NULL,
	body     BLOB    NOT NULL
);
CREATE TRIGGER IF NOT EXISTS checkpoints_no_update BEFORE UPDATE ON checkpoints
	BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_no_delete BEFORE DELETE ON checkpoints
	BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;

-- Receipts and intents may be deleted only when a signed checkpoint covers
-- them (Prune). Stores made before pruning existed had unconditional
-- triggers; they are replaced in the same transaction.
DROP TRIGGER IF EXISTS receipts_no_delete;
CREATE TRIGGER receipts_no_delete BEFORE DELETE ON receipts
	WHEN OLD.seq > (SELECT COALESCE(MAX(head_seq), 0) FROM checkpoints)
	BEGIN SELECT RAISE(ABORT, 'receipts are append-only: only receipts a signed checkpoint covers may be pruned'); END;
DROP TRIGGER IF EXISTS intents_no_delete;
CREATE TRIGGER intents_no_delete BEFORE DELETE ON intents
	WHEN NOT EXISTS (SELECT 1 FROM receipts r
		WHERE r.seq <= (SELECT COALESCE(MAX(head_seq), 0) FROM checkpoints)
		  AND (r.execution_id = OLD.execution_id OR (r.execution_id = '' AND OLD.plan_id != '' AND r.plan_id = OLD.plan_id)))
	BEGIN SELECT RAISE(ABORT, 'intents are append-only: only intents closed by pruned receipts may be removed'); END;
COMMIT;
`

// Store is the append-only, hash-chained receipt store (SQLite in WAL mode
// with synchronous=FULL: a call that returned has been fsynced).
type Store struct {
	db   *sql.DB
	keys *Keys
	// w is the writer's connection and its statements, prepared once:
	// parsing them (the receipts insert with its triggers) on every commit
	// was a few percent of termd's CPU per execution (commit.go).
	w  *writerConn
	mu sync.Mutex // serialises writes (the writer's commits, appendBatch, Prune) so seq/prev_hash are assigned in order
	// head is the chain's last (seq, hash), kept in memory by the single
	// writer instead of read back on every append; ok=false (at start and
	// after any failed append) reads it from the database again.
	head struct {
		seq  int64
		hash string
		ok   bool
	}
	// The group-commit queue (commit.go).
	qmu     sync.Mutex
	pending []*write
	leading bool       // a caller is committing, or is told to commit, what is pending
	idle    *sync.Cond // on qmu: leading went false
	closed  bool
	commits atomic.Int64 // transactions committed by the writer
	writes  atomic.Int64 // writes those transactions committed
	// usage is the recent receipts' sizes (usage.go); txUsage what the
	// open transaction added, kept once it commits (s.mu).
	usage   usage
	txUsage []usageEntry
	// onChange is told of appended and pruned receipts (follow.go).
	onChange   atomic.Pointer[[]func()]
	onChangeMu sync.Mutex
}

// CachePragma bounds the page cache of each SQLite connection (the store's
// maxConns and the search index's) to 512 KiB, not SQLite's default of
// 2,000 KiB: a commit touches the few pages at the end of its tables and
// indexes, and a miss is a read from the OS's page cache. With the default
// the SQLite heap of a store whose 4 connections had each read 6,000
// receipts was 20 MB (a cached page takes an 8 KiB slot of modernc's
// allocator), with 512 KiB 6.4 MB.
const CachePragma = "cache_size(-512)"

// maxConns is how many connections the store's pool opens, the writer's
// (which it holds) included.
const maxConns = 4

// Open opens (creating if needed) the store at path, a file in the state
// directory.
func Open(path string, keys *Keys) (*Store, error) {
	if keys == nil {
		return nil, errors.New("receipt store: keys are required")
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Add("_pragma", CachePragma)
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	db.SetMaxOpenConns(maxConns)
	if _, err := db.Exec(storeSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("receipt store %s: %w", path, err)
	}
	if err := addStartTicks(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("receipt store %s: %w", path, err)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		db.Close()
		return nil, fmt.Errorf("receipt store %s: cannot enable WAL (journal_mode=%q, %v)", path, mode, err)
	}
	s := &Store{db: db, keys: keys}
	if s.w, err = openWriterConn(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("receipt store %s: %w", path, err)
	}
	if err := s.loadUsage(); err != nil {
		s.w.close()
		db.Close()
		return nil, err
	}
	s.idle = sync.NewCond(&s.qmu)
	return s, nil
}

// Close commits what is queued, waits for that and closes the store;
// writes after Close fail.
func (s *Store) Close() error {
	if s.stopWrites() {
		s.w.close()
	}
	return s.db.Close()
}

const (
	insertReceiptSQL = `INSERT INTO receipts(seq, id, session_id, plan_id, execution_id, status, requester, approver, started_ns, hash, body)
		VALUES (?,?,?,?,?,?,?,?,?,?,?)`
	insertIntentSQL = `INSERT INTO intents(execution_id, plan_id, session_id, started_ns, body) VALUES (?,?,?,?,?)`
)

// AppendIntent durably records that an execution is about to be spawned.
// Call it before starting the process; the final receipt (Append with the
// same execution_id) closes it.
func (s *Store) AppendIntent(in Intent) error { return s.AppendIntentTimed(in, nil) }

// AppendIntentTimed is AppendIntent, saying in t (when not nil) where its
// time went.
func (s *Store) AppendIntentTimed(in Intent, t *WriteTimes) error {
	encode := time.Now()
	if in.ExecutionID == "" {
		return errors.New("receipt store: intent needs an execution id")
	}
	if in.StartedAt.IsZero() {
		in.StartedAt = time.Now()
	}
	in.StartedAt = in.StartedAt.UTC()
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	err = s.submit(func() error {
		_, err := s.w.insIntent.Exec(in.ExecutionID, in.PlanID, in.SessionID, in.StartedAt.UnixNano(), body)
		return err
	}, encode, t)
	if err != nil {
		return fmt.Errorf("receipt store: append intent %s: %w", in.ExecutionID, err)
	}
	return nil
}

// addStartTicks gives a store made before intent_spawns had start_ticks the
// column; the rows it has keep 0 (start unknown: recovery does not kill by
// their pid).
func addStartTicks(db *sql.DB) error {
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('intent_spawns') WHERE name = 'start_ticks'`).Scan(&n); err != nil {
		return fmt.Errorf("reading the intent_spawns columns: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := db.Exec(`ALTER TABLE intent_spawns ADD COLUMN start_ticks INTEGER NOT NULL DEFAULT 0`); err != nil && !strings.Contains(err.Error(), "duplicate column") {
		return fmt.Errorf("adding intent_spawns.start_ticks: %w", err)
	}
	return nil
}

// RecordSpawn durably adds the process ids of a spawned intent so that
// leftovers can be found and killed after a crash. start is the process's
// start time (clock ticks since boot, /proc/PID/stat field 22; 0 where it
// is not known): recovery kills by pid only a process that still has it,
// never one that took the pid over.
func (s *Store) RecordSpawn(executionID string, pid, pgid int, start uint64, cgroupPath string) error {
	at := time.Now().UnixNano()
	err := s.submit(func() error {
		return s.w.exec(`INSERT INTO intent_spawns(execution_id, pid, pgid, cgroup_path, at_ns, start_ticks) VALUES (?,?,?,?,?,?)`,
			executionID, pid, pgid, cgroupPath, at, int64(start))
	}, time.Time{}, nil)
	if err != nil {
		return fmt.Errorf("receipt store: record spawn of %s: %w", executionID, err)
	}
	return nil
}

// RecoverIntents returns every intent that no final receipt has closed, oldest
// first, with the latest recorded pid/pgid/start/cgroup. The daemon turns each into
// an outcome_unknown receipt (Intent.OutcomeUnknown, then Append) after
// killing any leftovers.
func (s *Store) RecoverIntents() ([]Intent, error) {
	rows, err := s.db.Query(`
		SELECT i.body,
		       (SELECT pid FROM intent_spawns p WHERE p.execution_id = i.execution_id ORDER BY p.rowid DESC LIMIT 1),
		       (SELECT pgid FROM intent_spawns p WHERE p.execution_id = i.execution_id ORDER BY p.rowid DESC LIMIT 1),
		       (SELECT cgroup_path FROM intent_spawns p WHERE p.execution_id = i.execution_id ORDER BY p.rowid DESC LIMIT 1),
		       (SELECT start_ticks FROM intent_spawns p WHERE p.execution_id = i.execution_id ORDER BY p.rowid DESC LIMIT 1)
		FROM intents i
		WHERE NOT EXISTS (SELECT 1 FROM receipts r WHERE r.execution_id = i.execution_id)
		  AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.execution_id = '' AND i.plan_id != '' AND r.plan_id = i.plan_id)
		ORDER BY i.rowid`)
	if err != nil {
		return nil, fmt.Errorf("receipt store: recover intents: %w", err)
	}
	defer rows.Close()
	var out []Intent
	for rows.Next() {
		var body []byte
		var pid, pgid, start sql.NullInt64
		var cg sql.NullString
		if err := rows.Scan(&body, &pid, &pgid, &cg, &start); err != nil {
			return nil, err
		}
		var in Intent
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("receipt store: corrupt intent: %w", err)
		}
		if pid.Valid {
			in.Pid, in.Pgid, in.PidStart = int(pid.Int64), int(pgid.Int64), uint64(start.Int64)
			if cg.String != "" {
				in.CgroupPath = cg.String
			}
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

func principalKey(p *receipt.Principal) string {
	if p == nil {
		return ""
	}
	return p.ID
}

// prepare checks a receipt before it takes a place in the chain.
func prepare(r *receipt.Receipt) (*receipt.Receipt, error) {
	if r == nil {
		return nil, errors.New("receipt store: nil receipt")
	}
	c := r.Clone()
	c.Normalize()
	if c.SchemaVersion != receipt.SchemaVersion {
		return nil, fmt.Errorf("receipt store: schema_version %q, want %q", c.SchemaVersion, receipt.SchemaVersion)
	}
	if !c.Status.Valid() {
		return nil, fmt.Errorf("receipt store: unknown status %q", c.Status)
	}
	if c.SharingRedacted {
		return nil, errors.New("receipt store: a share export is not a chain member")
	}
	if c.ID == "" {
		c.ID = uuid.NewString()
	}
	return c, nil
}

// Append assigns seq and prev_hash, signs, validates against the schema and
// commits the receipt durably (fsynced) before it returns; receipts
// appended concurrently share one transaction and one fsync (commit.go).
// The receipt closes the intent with the same execution_id (or, when it has
// none, the same plan_id) atomically, since an intent is open exactly while
// no such receipt exists. The argument is not modified; the stored receipt
// is returned.
func (s *Store) Append(r *receipt.Receipt) (*receipt.Receipt, error) { return s.AppendTimed(r, nil) }

// AppendTimed is Append, saying in t (when not nil) where its time went.
func (s *Store) AppendTimed(r *receipt.Receipt, t *WriteTimes) (*receipt.Receipt, error) {
	encode := time.Now()
	c, err := prepare(r)
	if err != nil {
		return nil, err
	}
	// Encoded and checked here, in the caller's goroutine; the writer
	// only seals it at its place in the chain.
	p, err := s.keys.Signer().Prepare(c, true)
	if err != nil {
		return nil, fmt.Errorf("receipt store: refusing receipt %s: %w", c.ID, err)
	}
	return s.appendReceipt(p, encode, t)
}

// keepHead forgets the in-memory chain head unless the append committed
// (insert advances it before the commit). Called with s.mu held.
// The receipts it added count towards the storage budgets once committed.
func (s *Store) keepHead(committed *bool) {
	if !*committed {
		s.head.ok = false
	} else if len(s.txUsage) > 0 {
		s.addUsage(s.txUsage)
		s.changed()
	}
	s.txUsage = s.txUsage[:0]
}

// insert appends a sealed receipt in the writer connection's open
// transaction (s.mu held).
func (s *Store) insert(p *receipt.Prepared) (*receipt.Receipt, error) {
	c := p.Receipt()
	last, prev := s.head.seq, s.head.hash
	if !s.head.ok {
		// The head is the newest receipt or, when a prune removed every
		// receipt, the newest checkpoint's pruned head.
		last, prev = 0, receipt.GenesisHash
		err := s.w.conn.QueryRowContext(context.Background(), `SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1`).Scan(&last, &prev)
		if errors.Is(err, sql.ErrNoRows) {
			err = s.w.conn.QueryRowContext(context.Background(), `SELECT head_seq, json_extract(body, '$.head_hash') FROM checkpoints ORDER BY head_seq DESC LIMIT 1`).Scan(&last, &prev)
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("receipt store: read chain head: %w", err)
		}
	}
	body, err := p.Seal(last+1, prev)
	if err != nil {
		return nil, err
	}
	hash := receipt.ChainHash(body)
	_, err = s.w.insReceipt.Exec(c.Seq, c.ID, c.SessionID, c.PlanID, c.ExecutionID, string(c.Status),
		c.Requester.ID, principalKey(c.Approver), c.StartedAt.UnixNano(), hash, body)
	if err != nil {
		s.head.ok = false
		return nil, fmt.Errorf("receipt store: append %s: %w", c.ID, err)
	}
	s.head.seq, s.head.hash, s.head.ok = c.Seq, hash, true
	s.txUsage = append(s.txUsage, usageEntry{started: c.StartedAt.UnixNano(), requester: c.Requester.ID, size: int64(len(body))})
	return c, nil
}

// appendBatch appends many receipts in one transaction. It exists for
// benchmarks and imports that build large chains; the daemon uses Append.
func (s *Store) appendBatch(rs []*receipt.Receipt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	committed := false
	defer s.keepHead(&committed)
	if err := s.w.begin(); err != nil {
		return err
	}
	defer s.w.rollbackUnless(&committed)
	for _, r := range rs {
		c, err := prepare(r)
		if err != nil {
			return err
		}
		p, err := s.keys.Signer().Prepare(c, false)
		if err != nil {
			return err
		}
		if _, err := s.insert(p); err != nil {
			return err
		}
	}
	if _, err := s.w.commit.Exec(); err != nil {
		return err
	}
	committed = true
	return nil
}

func decodeStored(body []byte) (*receipt.Receipt, error) {
	var r receipt.Receipt
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("receipt store: corrupt receipt: %w", err)
	}
	return &r, nil
}

// Get returns the receipt with the given id.
func (s *Store) Get(id string) (*receipt.Receipt, error) {
	var body []byte
	err := s.db.QueryRow(`SELECT body FROM receipts WHERE id = ?`, id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return decodeStored(body)
}

// ByExecution returns the final receipt of an execution.
func (s *Store) ByExecution(executionID string) (*receipt.Receipt, error) {
	var body []byte
	err := s.db.QueryRow(`SELECT body FROM receipts WHERE execution_id = ? ORDER BY seq DESC LIMIT 1`, executionID).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: execution %s", ErrNotFound, executionID)
	}
	if err != nil {
		return nil, err
	}
	return decodeStored(body)
}

// GetSeq returns the receipt at seq.
func (s *Store) GetSeq(seq int64) (*receipt.Receipt, error) {
	var body []byte
	err := s.db.QueryRow(`SELECT body FROM receipts WHERE seq = ?`, seq).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: seq %d", ErrNotFound, seq)
	}
	if err != nil {
		return nil, err
	}
	return decodeStored(body)
}

// Latest returns the newest receipt of a session ("" = of any session).
func (s *Store) Latest(sessionID string) (*receipt.Receipt, error) {
	var body []byte
	var err error
	if sessionID == "" {
		err = s.db.QueryRow(`SELECT body FROM receipts ORDER BY seq DESC LIMIT 1`).Scan(&body)
	} else {
		err = s.db.QueryRow(`SELECT body FROM receipts WHERE session_id = ? ORDER BY seq DESC LIMIT 1`, sessionID).Scan(&body)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return decodeStored(body)
}

// Filter selects receipts for List and ExportJSONL. Zero fields do not
// filter.
type Filter struct {
	SessionID string
	Status    receipt.Status
	// Since and Until bound started_at: Since <= started_at < Until.
	Since, Until time.Time
	// Principal matches the requester's or the approver's id.
	Principal string
	// Limit 0 means DefaultListLimit; a negative Limit means no limit.
	Limit  int
	Offset int
	// Newest first when true; oldest first (seq order) otherwise.
	Desc bool
}

// DefaultListLimit is the page size when Filter.Limit is 0.
const DefaultListLimit = 100

func (f Filter) query() (string, []any) {
	var where []string
	var args []any
	if f.SessionID != "" {
		where = append(where, "session_id = ?")
		args = append(args, f.SessionID)
	}
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(f.Status))
	}
	if !f.Since.IsZero() {
		where = append(where, "started_ns >= ?")
		args = append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		where = append(where, "started_ns < ?")
		args = append(args, f.Until.UnixNano())
	}
	if f.Principal != "" {
		where = append(where, "(requester = ? OR (approver = ? AND approver != ''))") // approver != '': receipts_approved_by
		args = append(args, f.Principal, f.Principal)
	}
	q := "SELECT body FROM receipts"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Desc {
		q += " ORDER BY seq DESC"
	} else {
		q += " ORDER BY seq ASC"
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	q += " LIMIT ? OFFSET ?"
	args = append(args, limit, max(f.Offset, 0))
	return q, args
}

// List returns the receipts matching f.
func (s *Store) List(f Filter) ([]*receipt.Receipt, error) {
	if f.Status != "" && !f.Status.Valid() {
		return nil, fmt.Errorf("receipt store: unknown status %q", f.Status)
	}
	var out []*receipt.Receipt
	err := s.scan(f, func(body []byte) error {
		r, err := decodeStored(body)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// ExportJSONL writes the receipts matching f to w, one canonical signed
// receipt per line, exactly as stored.
func (s *Store) ExportJSONL(w io.Writer, f Filter) error {
	if f.Status != "" && !f.Status.Valid() {
		return fmt.Errorf("receipt store: unknown status %q", f.Status)
	}
	return s.scan(f, func(body []byte) error {
		if _, err := w.Write(body); err != nil {
			return err
		}
		_, err := w.Write([]byte{'\n'})
		return err
	})
}

func (s *Store) scan(f Filter, fn func([]byte) error) error {
	q, args := f.query()
	rows, err := s.db.Query(q, args...)
	if err != nil {
		return fmt.Errorf("receipt store: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return err
		}
		if err := fn(body); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Count returns the number of receipts.
// StoredSince is how many bytes of receipts were appended since t, by one
// requester (its principal key) or, with requester "", by everyone.
func (s *Store) StoredSince(requester string, t time.Time) (int64, error) {
	if n, ok := s.storedSince(requester, t); ok {
		return n, nil
	}
	var n int64
	err := s.db.QueryRow(`SELECT COALESCE(SUM(length(body)), 0) FROM receipts WHERE started_ns >= ? AND (? = '' OR requester = ?)`,
		t.UnixNano(), requester, requester).Scan(&n)
	return n, err
}

// TotalBytes is how many bytes of receipts the store holds (the stored
// bodies, as StoredSince counts them).
func (s *Store) TotalBytes() (int64, error) {
	s.usage.mu.Lock()
	loaded, total := s.usage.loaded, s.usage.total
	s.usage.mu.Unlock()
	if loaded {
		return total, nil
	}
	var n int64
	err := s.db.QueryRow(`SELECT COALESCE(SUM(length(body)), 0) FROM receipts`).Scan(&n)
	return n, err
}

func (s *Store) Count() (int64, error) {
	var n int64
	err := s.db.QueryRow(`SELECT COUNT(*) FROM receipts`).Scan(&n)
	return n, err
}

// VerifyChain checks the whole chain in seq order: first the signed
// checkpoints that pruning left (each signed, linked to the one before, its
// seqs following on), then the receipts from the last checkpoint's head on:
// seq numbers are contiguous, each stored body decodes strictly, both
// signatures verify, the body's seq is its row's, its prev_hash is the hash
// of the previous body (for the first kept receipt, the checkpoint's
// head_hash), and the stored hash is its own. It returns how many receipts
// passed and, on failure, the first bad seq (for a deleted receipt, the
// missing seq) with the reason. Schema validation is left to Verify and
// Append (it would triple the cost of a full-chain check).
func (s *Store) VerifyChain() (checked int, badSeq int64, err error) {
	pubs := s.keys.PublicKeys()
	hk := s.keys.HMACKey()
	cp, err := s.verifyCheckpoints(pubs, hk)
	if err != nil {
		var ve *receipt.VerifyError
		if errors.As(err, &ve) {
			return 0, ve.Seq, err
		}
		return 0, 1, err
	}
	expected := int64(1)
	prev := receipt.GenesisHash
	if cp != nil {
		expected, prev = cp.HeadSeq+1, cp.HeadHash
	}
	rows, err := s.db.Query(`SELECT seq, hash, body FROM receipts ORDER BY seq`)
	if err != nil {
		return 0, 0, fmt.Errorf("receipt store: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var hash string
		var body []byte
		if err := rows.Scan(&seq, &hash, &body); err != nil {
			return checked, expected, err
		}
		if seq != expected {
			switch {
			case seq < expected && cp != nil && seq <= cp.HeadSeq:
				return checked, seq, &receipt.VerifyError{Seq: seq, Reason: fmt.Sprintf("present although the checkpoint says seq %d–%d were pruned", cp.FirstSeq, cp.HeadSeq)}
			case seq < expected:
				return checked, seq, &receipt.VerifyError{Seq: seq, Reason: "out of order"}
			case checked == 0 && cp == nil:
				return checked, expected, &receipt.VerifyError{Seq: expected, Reason: fmt.Sprintf("missing: the chain starts at seq %d and no signed checkpoint covers seq 1–%d (receipts were removed, not pruned)", seq, seq-1)}
			case checked == 0:
				return checked, expected, &receipt.VerifyError{Seq: expected, Reason: fmt.Sprintf("missing: the checkpoint covers seq %d–%d but the chain goes on at seq %d", cp.FirstSeq, cp.HeadSeq, seq)}
			}
			return checked, expected, &receipt.VerifyError{Seq: expected, Reason: fmt.Sprintf("missing: the chain jumps from %d to %d", expected-1, seq)}
		}
		r, err := receipt.VerifyStored(body, pubs, hk)
		if err != nil {
			var ve *receipt.VerifyError
			if errors.As(err, &ve) {
				ve.Seq = seq
				return checked, seq, ve
			}
			return checked, seq, &receipt.VerifyError{Seq: seq, Reason: err.Error()}
		}
		if r.Seq != seq {
			return checked, seq, &receipt.VerifyError{Seq: seq, Reason: fmt.Sprintf("stored at seq %d but signed as seq %d: receipts were reordered", seq, r.Seq)}
		}
		if r.PrevHash != prev {
			if checked == 0 && cp != nil {
				return checked, seq, &receipt.VerifyError{Seq: seq, Reason: fmt.Sprintf("prev_hash does not link to the checkpoint of seq %d–%d: the first kept receipt or the checkpoint was altered", cp.FirstSeq, cp.HeadSeq)}
			}
			return checked, seq, &receipt.VerifyError{Seq: seq, Reason: "prev_hash does not match the previous receipt: a receipt before it was altered, removed or reordered"}
		}
		h := receipt.ChainHash(body)
		if h != hash {
			return checked, seq, &receipt.VerifyError{Seq: seq, Reason: "stored hash does not match the receipt"}
		}
		prev = h
		expected++
		checked++
	}
	if err := rows.Err(); err != nil {
		return checked, expected, err
	}
	return checked, 0, nil
}

// verifyCheckpoints checks every checkpoint in order and returns the last
// (nil when nothing was ever pruned).
func (s *Store) verifyCheckpoints(pubs map[string]ed25519.PublicKey, hk []byte) (*receipt.Checkpoint, error) {
	rows, err := s.db.Query(`SELECT head_seq, hash, body FROM checkpoints ORDER BY head_seq`)
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	defer rows.Close()
	var last *receipt.Checkpoint
	lastHash := ""
	for rows.Next() {
		var head int64
		var hash string
		var body []byte
		if err := rows.Scan(&head, &hash, &body); err != nil {
			return nil, err
		}
		c, err := receipt.VerifyCheckpoint(body, pubs, hk)
		if err != nil {
			return nil, &receipt.VerifyError{Seq: head, Reason: err.Error()}
		}
		from := int64(1)
		if last != nil {
			from = last.HeadSeq + 1
		}
		switch {
		case c.HeadSeq != head || receipt.ChainHash(body) != hash:
			return nil, &receipt.VerifyError{Seq: head, Reason: "the stored checkpoint row does not match its signed body"}
		case c.PrevCheckpoint != lastHash:
			return nil, &receipt.VerifyError{Seq: head, Reason: fmt.Sprintf("the checkpoint of seq %d–%d does not link to the checkpoint before it: a checkpoint was removed or replaced", c.FirstSeq, c.HeadSeq)}
		case c.FirstSeq != from:
			return nil, &receipt.VerifyError{Seq: from, Reason: fmt.Sprintf("the checkpoint of seq %d–%d does not follow on from seq %d", c.FirstSeq, c.HeadSeq, from-1)}
		}
		last, lastHash = c, hash
	}
	return last, rows.Err()
}

// Head is the chain's head: the newest receipt's seq and chain hash, or the
// newest checkpoint's pruned head when no receipt is left (0, "" for an
// empty store).
func (s *Store) Head() (int64, string, error) {
	var seq int64
	var hash string
	err := s.db.QueryRow(`SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1`).Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		err = s.db.QueryRow(`SELECT head_seq, json_extract(body, '$.head_hash') FROM checkpoints ORDER BY head_seq DESC LIMIT 1`).Scan(&seq, &hash)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	return seq, hash, err
}

// LastCheckpoint is the newest checkpoint, with its signed bytes (nil when
// nothing was pruned).
func (s *Store) LastCheckpoint() (*receipt.Checkpoint, []byte, error) {
	var body []byte
	err := s.db.QueryRow(`SELECT body FROM checkpoints ORDER BY head_seq DESC LIMIT 1`).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var c receipt.Checkpoint
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, nil, fmt.Errorf("receipt store: corrupt checkpoint: %w", err)
	}
	return &c, body, nil
}

// VerifyReceipt checks r against this store: signatures with both keys, the
// schema, and its place in the chain. A receipt that is not a share export
// must be byte-for-byte the stored one; a share export must name a stored
// receipt (id, seq, prev_hash) and be signed by this daemon.
func (s *Store) VerifyReceipt(r *receipt.Receipt) error {
	if err := receipt.Verify(r, s.keys.PublicKeys(), s.keys.HMACKey()); err != nil {
		return err
	}
	var hash string
	var body []byte
	cp, _, err := s.LastCheckpoint()
	if err != nil {
		return err
	}
	err = s.db.QueryRow(`SELECT hash, body FROM receipts WHERE seq = ?`, r.Seq).Scan(&hash, &body)
	if errors.Is(err, sql.ErrNoRows) {
		if cp != nil && r.Seq <= cp.HeadSeq {
			return &receipt.VerifyError{Seq: r.Seq, Reason: fmt.Sprintf("pruned: the store keeps a signed checkpoint for seq 1–%d instead of the receipts", cp.HeadSeq)}
		}
		return &receipt.VerifyError{Seq: r.Seq, Reason: "no receipt with this seq in the store"}
	}
	if err != nil {
		return err
	}
	stored, err := decodeStored(body)
	if err != nil {
		return err
	}
	if stored.ID != r.ID || stored.PrevHash != r.PrevHash {
		return &receipt.VerifyError{Seq: r.Seq, Reason: "the store holds a different receipt at this seq"}
	}
	if !r.SharingRedacted {
		mine, err := receipt.CanonicalBytes(r)
		if err != nil {
			return err
		}
		if !bytes.Equal(mine, body) {
			return &receipt.VerifyError{Seq: r.Seq, Reason: "receipt differs from the stored one"}
		}
	}
	if r.Seq > 1 {
		var prevHash string
		err := s.db.QueryRow(`SELECT hash FROM receipts WHERE seq = ?`, r.Seq-1).Scan(&prevHash)
		switch {
		case errors.Is(err, sql.ErrNoRows) && cp != nil && cp.HeadSeq == r.Seq-1:
			// The first receipt after a prune links to the checkpoint's head.
			prevHash = cp.HeadHash
		case err != nil:
			return &receipt.VerifyError{Seq: r.Seq, Reason: "previous receipt is missing"}
		}
		if prevHash != r.PrevHash {
			return &receipt.VerifyError{Seq: r.Seq, Reason: "prev_hash does not link to the previous receipt"}
		}
	}
	return nil
}
