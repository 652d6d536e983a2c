package receiptstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/termd/termd/receipt"
)

// Group commit. Every write to the store (receipts, intents, spawn records)
// is queued; one writer at a time (the leader) takes everything queued at
// that moment, applies it in one transaction, commits (one fsync,
// synchronous=FULL) and only then answers each caller. The leader is a
// caller: one that finds no leader commits in its own goroutine, so a write
// made alone costs no hand-off to another goroutine and back. While one
// commit is in its fsync the next batch collects; when it is done, the
// leader hands the lead to the oldest waiting write, whose caller commits
// the next batch. So concurrent executions share fsyncs instead of
// queueing for one each. The leader is the chain's single writer: seq and
// prev_hash are assigned in queue order, with the head kept in memory.

// errClosed answers writes queued after Close.
var errClosed = errors.New("receipt store: closed")

// write is one queued change; apply runs inside the batch's transaction.
// done says once that it is answered (false), and may say before that
// that its caller leads (true). The times say where its wait went
// (WriteTimes).
type write struct {
	apply func() error // on s.w's connection, in the open transaction
	err   error
	done  chan bool

	queued, begun, applied, committed time.Time
}

// WriteTimes is where one durable write's time went (AppendIntentTimed,
// AppendTimed), for the daemon's stage report. Apply and Commit are those
// of the whole batch the write was committed in.
type WriteTimes struct {
	Encode time.Duration // the caller's work before queueing: an intent's JSON, a receipt's Prepare (encoding, schema check)
	Wait   time.Duration // queued until its batch began (another batch's commit), and committed until the caller ran again
	Apply  time.Duration // BEGIN and the statements (a receipt's seal: seq, prev_hash, signatures)
	Commit time.Duration // COMMIT: the WAL's new frames and their fsync
}

// submit queues fn and waits until the transaction holding it committed
// (nil) or failed (its error), committing it itself when no other caller
// leads. With t set, it says where the time since encode (when the caller
// began its part) went.
func (s *Store) submit(fn func() error, encode time.Time, t *WriteTimes) error {
	w := &write{apply: fn, done: make(chan bool, 1), queued: time.Now()}
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return errClosed
	}
	s.pending = append(s.pending, w)
	lead := !s.leading
	s.leading = true
	s.qmu.Unlock()
	if !lead {
		lead = <-w.done
	}
	if lead {
		s.lead()
		<-w.done
	}
	if t != nil && w.err == nil {
		*t = WriteTimes{
			Encode: w.queued.Sub(encode),
			Wait:   w.begun.Sub(w.queued) + time.Since(w.committed),
			Apply:  w.applied.Sub(w.begun),
			Commit: w.committed.Sub(w.applied),
		}
	}
	return w.err
}

// lead commits everything queued (the leader's own write among it), then
// hands the lead to the oldest write queued meanwhile, or leaves none.
func (s *Store) lead() {
	s.qmu.Lock()
	batch := s.pending
	s.pending = nil
	s.qmu.Unlock()
	s.commit(batch)
	s.qmu.Lock()
	if len(s.pending) > 0 {
		s.pending[0].done <- true
	} else {
		s.leading = false
		s.idle.Broadcast()
	}
	s.qmu.Unlock()
}

// stopWrites makes later writes fail and waits until those queued are
// answered (Close); it says whether it was the first to.
func (s *Store) stopWrites() bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	first := !s.closed
	s.closed = true
	for s.leading {
		s.idle.Wait()
	}
	return first
}

// commit applies a batch in one transaction and answers every caller in
// it. Each write runs inside its own savepoint, so one that fails (say, a
// receipt the schema refuses) is rolled back alone and fails only its own
// caller; the others still commit together.
func (s *Store) commit(batch []*write) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.commitTx(batch)
	now := time.Now()
	for _, w := range batch {
		w.committed = now
		if w.err == nil {
			w.err = err
		}
		w.done <- false
	}
}

// commitTx runs one transaction, leaving each write's own failure in its
// err and returning what failed the whole transaction. Called with s.mu
// held. A failed insert forgets the in-memory chain head, so the next one
// reads it inside the transaction (which sees the batch's earlier
// inserts); a failed commit forgets it too.
func (s *Store) commitTx(batch []*write) error {
	committed := false
	defer s.keepHead(&committed)
	stamp(batch, func(w *write) *time.Time { return &w.begun })
	if err := s.w.begin(); err != nil {
		return fmt.Errorf("receipt store: %w", err)
	}
	defer s.w.rollbackUnless(&committed)
	alone := len(batch) == 1
	for _, w := range batch {
		if alone {
			if w.err = w.apply(); w.err != nil {
				return w.err
			}
			break
		}
		if err := s.w.exec(`SAVEPOINT w`); err != nil {
			return fmt.Errorf("receipt store: %w", err)
		}
		if w.err = w.apply(); w.err != nil {
			s.head.ok = false
			if err := s.w.exec(`ROLLBACK TO w`); err != nil {
				return fmt.Errorf("receipt store: %w", err)
			}
		}
		if err := s.w.exec(`RELEASE w`); err != nil {
			return fmt.Errorf("receipt store: %w", err)
		}
	}
	stamp(batch, func(w *write) *time.Time { return &w.applied })
	if _, err := s.w.commit.Exec(); err != nil {
		return fmt.Errorf("receipt store: commit: %w", err)
	}
	committed = true
	s.commits.Add(1)
	for _, w := range batch {
		if w.err == nil {
			s.writes.Add(1)
		}
	}
	return nil
}

// writerConn is the connection the writer (and appendBatch) commits on,
// with its statements prepared once. database/sql's Tx parsed BEGIN and
// COMMIT again and started a goroutine (its context's watcher) for every
// transaction; a transaction here is two prepared statements.
type writerConn struct {
	conn                                               *sql.Conn
	beginStmt, commit, rollback, insReceipt, insIntent *sql.Stmt
}

func openWriterConn(db *sql.DB) (*writerConn, error) {
	c, err := db.Conn(context.Background())
	if err != nil {
		return nil, err
	}
	w := &writerConn{conn: c}
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{{&w.beginStmt, `BEGIN IMMEDIATE`}, {&w.commit, `COMMIT`}, {&w.rollback, `ROLLBACK`},
		{&w.insReceipt, insertReceiptSQL}, {&w.insIntent, insertIntentSQL}} {
		if *p.st, err = c.PrepareContext(context.Background(), p.sql); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

func (w *writerConn) begin() error {
	_, err := w.beginStmt.Exec()
	return err
}

// rollbackUnless rolls the open transaction back unless it committed (a
// failed COMMIT can leave it open; ROLLBACK's error when SQLite already
// rolled it back is of no interest).
func (w *writerConn) rollbackUnless(committed *bool) {
	if !*committed {
		_, _ = w.rollback.Exec()
	}
}

func (w *writerConn) exec(q string, args ...any) error {
	_, err := w.conn.ExecContext(context.Background(), q, args...)
	return err
}

func (w *writerConn) close() {
	for _, st := range []*sql.Stmt{w.beginStmt, w.commit, w.rollback, w.insReceipt, w.insIntent} {
		if st != nil {
			st.Close()
		}
	}
	w.conn.Close()
}

// WriteStats says how many writes (intents, receipts, spawn records) the
// store committed since it was opened, and in how many transactions: each
// transaction is one fsync, so writes/commits is how many durable writes
// shared one.
func (s *Store) WriteStats() (writes, commits int64) {
	return s.writes.Load(), s.commits.Load()
}

// stamp sets one of the batch's times to now.
func stamp(batch []*write, field func(*write) *time.Time) {
	now := time.Now()
	for _, w := range batch {
		*field(w) = now
	}
}

// appendReceipt is Append's write: the chain position and signature (they
// cover seq and prev_hash) happen in the writer, in queue order; the
// encoding and schema check were done by the caller (receipt.Prepare),
// which began at encode.
func (s *Store) appendReceipt(p *receipt.Prepared, encode time.Time, t *WriteTimes) (*receipt.Receipt, error) {
	var out *receipt.Receipt
	err := s.submit(func() error {
		r, err := s.insert(p)
		out = r
		return err
	}, encode, t)
	if err != nil {
		return nil, err
	}
	return out, nil
}
