package otlpexport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/termd/termd/daemon/receiptstore"
)

// CursorFile and StatusFile are the exporter's files in the state
// directory. The cursor is durable (written to a temp file, fsynced,
// renamed, directory fsynced): after a crash it names a seq that was
// exported, so nothing after it is skipped; at worst a batch is sent
// twice. The status file is for `termd doctor` and may lag.
const (
	CursorFile = "otlp-export.cursor"
	StatusFile = "otlp-export.status"
)

// Cursor is the last receipt the collector acknowledged.
type Cursor struct {
	Seq       int64     `json:"seq"`
	ReceiptID string    `json:"receipt_id,omitempty"`
	Endpoint  string    `json:"endpoint,omitempty"`
	At        time.Time `json:"at"`
}

// ReadCursor reads the cursor in dir; a missing file is seq 0 (export from
// the first receipt kept).
func ReadCursor(dir string) (Cursor, error) {
	var c Cursor
	data, err := os.ReadFile(filepath.Join(dir, CursorFile))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("otlp export cursor: %w", err)
	}
	if err := json.Unmarshal(data, &c); err != nil || c.Seq < 0 {
		return c, fmt.Errorf("otlp export cursor %s is damaged (%v): remove it to export every receipt again (duplicates carry the same receipt id)", filepath.Join(dir, CursorFile), err)
	}
	return c, nil
}

func writeCursor(dir string, c Cursor) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return receiptstore.WriteFileAtomic(filepath.Join(dir, CursorFile), append(data, '\n'), 0o600)
}

// Status is what the running exporter last knew, for `termd doctor`.
type Status struct {
	Endpoint      string    `json:"endpoint"`
	Protocol      string    `json:"protocol"`
	HeadSeq       int64     `json:"head_seq"`
	ExportedSeq   int64     `json:"exported_seq"`
	Exported      int64     `json:"exported"` // receipts acknowledged since termd started
	Skipped       int64     `json:"skipped"`  // pruned before they could be exported
	LastError     string    `json:"last_error,omitempty"`
	LastErrorAt   time.Time `json:"last_error_at,omitzero"`
	LastSuccessAt time.Time `json:"last_success_at,omitzero"`
	Updated       time.Time `json:"updated"`
	PID           int       `json:"pid"`
}

// Lag is how many receipts are not yet acknowledged.
func (s Status) Lag() int64 {
	if s.HeadSeq > s.ExportedSeq {
		return s.HeadSeq - s.ExportedSeq
	}
	return 0
}

// ReadStatus reads the status file in dir (fs.ErrNotExist when the
// exporter never ran there).
func ReadStatus(dir string) (Status, error) {
	var s Status
	data, err := os.ReadFile(filepath.Join(dir, StatusFile))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s: %w", filepath.Join(dir, StatusFile), err)
	}
	return s, nil
}

func writeStatusFile(dir string, s Status) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	// The status file is a report for `termd doctor`, rewritten as export
	// moves: replaced whole (rename) but not synced, since losing its last
	// update in a crash loses nothing (the cursor is the durable record).
	path := filepath.Join(dir, StatusFile)
	f, err := os.CreateTemp(dir, ".tmp-"+StatusFile+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
