package receiptstore

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/termd/termd/receipt"
)

// What derived views of the chain (the search index, daemon/search) need to
// follow it without touching it: a notice after each commit that added or
// pruned receipts, and reads by seq.

// Stored is a receipt as the chain holds it, with its chain hash.
type Stored struct {
	Seq  int64
	Hash string
	Body []byte // the signed canonical JSON
}

// OnChange registers fn to be called after every commit that appended
// receipts and after every prune. It runs in the store's single writer, so
// it must not block (signal a channel, do the work elsewhere). Each
// follower (the search index, the OTLP exporter) registers once, before
// receipts are appended.
func (s *Store) OnChange(fn func()) {
	s.onChangeMu.Lock()
	defer s.onChangeMu.Unlock()
	var fns []func()
	if old := s.onChange.Load(); old != nil {
		fns = append(fns, *old...)
	}
	fns = append(fns, fn)
	s.onChange.Store(&fns)
}

func (s *Store) changed() {
	if fns := s.onChange.Load(); fns != nil {
		for _, fn := range *fns {
			fn()
		}
	}
}

// After returns up to limit receipts with seq > seq, in chain order.
func (s *Store) After(seq int64, limit int) ([]Stored, error) {
	rows, err := s.db.Query(`SELECT seq, hash, body FROM receipts WHERE seq > ? ORDER BY seq LIMIT ?`, seq, limit)
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		var st Stored
		if err := rows.Scan(&st.Seq, &st.Hash, &st.Body); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// Decode decodes a stored body.
func (st Stored) Decode() (*receipt.Receipt, error) {
	return decodeStored(st.Body)
}

// FirstSeq is the oldest receipt still kept (0 when the store holds none).
func (s *Store) FirstSeq() (int64, error) {
	var first sql.NullInt64
	err := s.db.QueryRow(`SELECT MIN(seq) FROM receipts`).Scan(&first)
	return first.Int64, err
}

// HashAt is the chain hash of the receipt at seq ("" when there is none).
func (s *Store) HashAt(seq int64) (string, error) {
	var h string
	err := s.db.QueryRow(`SELECT hash FROM receipts WHERE seq = ?`, seq).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return h, err
}
