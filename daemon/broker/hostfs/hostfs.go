// Package hostfs is what termd's broker does on the host's file system for
// commands and callers: the base of the commands' private homes and each
// uid's HOME (homes.go), the executions' private TMPDIRs and the ones made
// ahead (tmpdirs.go), opening and walking files with a caller's rights
// (access*.go), the workspace reads confined to the workspace roots
// (workspace.go), the paths the config names private (private.go), and the
// storage budgets measured on the state directory (storage.go).
//
// Its privileged work in principal-owned trees goes through descriptors
// (internal/safefs, openat with O_NOFOLLOW) or runs with the caller's
// filesystem credentials: a link or a swapped directory a principal planted
// makes it fail, never redirects it.
//
// It imports daemon/domain, daemon/config, daemon/errdefs,
// daemon/receiptstore, daemon/search, internal/… and the generated proto;
// never daemon/broker or a sibling noun package. What it needs of the
// broker (its protected paths) comes through Deps.
package hostfs

import (
	"log/slog"
	"sync"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/search"
)

// Deps are what FS needs of the daemon and the broker.
type Deps struct {
	Config func() *config.Config
	Log    *slog.Logger
	// Store holds the receipts the storage budgets count (nil = no budgets).
	Store *receiptstore.Store
	// Search is the receipts' full-text index, counted in the budgets (nil = none).
	Search *search.Index
	// Redactor redacts workspace files as they are served.
	Redactor *receiptstore.Redactor
	// Protected are termd's own files and directories (the broker's list):
	// never served as workspace files, never listed.
	Protected func() []string
}

// FS is the broker's host file system part.
type FS struct {
	Deps

	tmpSpares tmpSpares     // TMPDIRs made ahead (tmpdirs.go)
	homes     homeBaseCache // where the commands' homes are (homes.go)
	shared    sync.Mutex    // makes the files shared by link (shared.go)
}

// New returns the host file system part of a broker.
func New(d Deps) *FS {
	return &FS{Deps: d}
}
