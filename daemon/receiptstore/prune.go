package receiptstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/termd/termd/receipt"
)

// ErrNothingToPrune is returned by Prune when no receipt at the start of the
// chain is older than the cut-off.
var ErrNothingToPrune = errors.New("no receipt at the start of the chain is older than that")

// pruneHook lets the crash test know when a prune is deleting (tests only).
var pruneHook func(stage string)

// Prune removes the oldest receipts of the chain, those that started before
// before, and leaves a signed checkpoint of the pruned head in their place,
// in one durable transaction: after a crash the store holds either the old
// chain or the checkpoint and the shorter chain, and both verify. The pruned
// part is a prefix of the chain: it ends at the last receipt before the
// first one that is not older than before (a long command that started
// earlier but finished later is kept with everything after it). The chain
// is verified first, so pruning never destroys the evidence of tampering.
// Intents closed by pruned receipts go with them. by names who pruned.
//
// SQLite reuses the freed pages for new receipts; the file itself does not
// shrink.
func (s *Store) Prune(before time.Time, by string) (*receipt.Checkpoint, error) {
	if _, bad, err := s.VerifyChain(); err != nil {
		return nil, fmt.Errorf("the receipt chain does not verify (seq %d: %v): pruning would destroy the evidence; run `termctl audit verify` and keep a copy of the store before anything else", bad, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head.ok = false // the next append reads the head again (a receipt or the checkpoint)
	tx, err := s.db.BeginTx(context.Background(), nil)
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	defer tx.Rollback()
	cut := before.UnixNano()
	var first, head sql.NullInt64
	if err := tx.QueryRow(`SELECT MIN(seq) FROM receipts`).Scan(&first); err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	if !first.Valid {
		return nil, ErrNothingToPrune
	}
	// The prefix ends before the first receipt that is not older than the cut.
	if err := tx.QueryRow(`SELECT MIN(seq) - 1 FROM receipts WHERE started_ns >= ?`, cut).Scan(&head); err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	if !head.Valid {
		if err := tx.QueryRow(`SELECT MAX(seq) FROM receipts`).Scan(&head); err != nil {
			return nil, fmt.Errorf("receipt store: %w", err)
		}
	}
	if head.Int64 < first.Int64 {
		return nil, ErrNothingToPrune
	}
	c := &receipt.Checkpoint{
		HeadSeq: head.Int64, FirstSeq: first.Int64, Count: head.Int64 - first.Int64 + 1,
		Before: before, CreatedAt: time.Now(), By: by,
	}
	var fromNs, untilNs int64
	if err := tx.QueryRow(`SELECT MIN(started_ns), MAX(started_ns) FROM receipts WHERE seq <= ?`, c.HeadSeq).Scan(&fromNs, &untilNs); err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	c.From, c.Until = time.Unix(0, fromNs), time.Unix(0, untilNs)
	if err := tx.QueryRow(`SELECT hash FROM receipts WHERE seq = ?`, c.HeadSeq).Scan(&c.HeadHash); err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	err = tx.QueryRow(`SELECT hash FROM checkpoints ORDER BY head_seq DESC LIMIT 1`).Scan(&c.PrevCheckpoint)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	body, err := s.keys.Signer().SignCheckpoint(c)
	if err != nil {
		return nil, fmt.Errorf("receipt store: signing the checkpoint: %w", err)
	}
	if _, err := tx.Exec(`INSERT INTO checkpoints(head_seq, hash, body) VALUES (?,?,?)`, c.HeadSeq, receipt.ChainHash(body), body); err != nil {
		return nil, fmt.Errorf("receipt store: writing the checkpoint: %w", err)
	}
	if pruneHook != nil {
		pruneHook("deleting")
	}
	// Intents (and their spawn records) closed by a pruned receipt go too:
	// an intent without its receipt would read as an interrupted execution.
	const closed = `SELECT i.execution_id FROM intents i WHERE EXISTS (SELECT 1 FROM receipts r WHERE r.seq <= ?1
		AND (r.execution_id = i.execution_id OR (r.execution_id = '' AND i.plan_id != '' AND r.plan_id = i.plan_id)))`
	for _, q := range []string{
		`DELETE FROM intent_spawns WHERE execution_id IN (` + closed + `)`,
		`DELETE FROM intents WHERE execution_id IN (` + closed + `)`,
		`DELETE FROM receipts WHERE seq <= ?1`,
	} {
		if _, err := tx.Exec(q, c.HeadSeq); err != nil {
			return nil, fmt.Errorf("receipt store: pruning: %w", err)
		}
	}
	if pruneHook != nil {
		pruneHook("committing")
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("receipt store: commit: %w", err)
	}
	if err := s.loadUsage(); err != nil {
		s.usage.mu.Lock()
		s.usage.loaded = false // StoredSince asks the database
		s.usage.mu.Unlock()
	}
	s.changed()
	return c, nil
}
