package hostfs

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// StorageAllows refuses a new execution before anything is spawned when its
// receipt might not fit: the state directory's filesystem is below the free
// space floor, or the caller (or everyone) has stored its daily budget of
// receipts. Refusing up front keeps the audit promise: a command that runs
// always gets its signed receipt. The plan stays as it was, to run later.
// With storage.over_budget: tail, a spent daily budget lets the execution
// run and returns why its stored output is cut to a small tail instead.
func (h *FS) StorageAllows(caller *termdv1.Principal) (tail string, err error) {
	cfg := h.Config()
	lim := cfg.Storage
	if free, err := freeBytes(cfg.StateDir); err == nil && free < lim.MinFreeBytes {
		return "", errdefs.Exhausted("the state directory %s has %s free, below storage.min_free_bytes (%s): new executions are refused so receipts are never cut off by a full disk; free space there, prune old receipts (`termctl receipts prune --before DATE`), or lower storage.min_free_bytes", cfg.StateDir, domain.BytesWord(free), domain.BytesWord(lim.MinFreeBytes))
	}
	if h.Store == nil {
		return "", nil
	}
	key := domain.PrincipalKey(caller)
	over := ""
	if n, err := h.storedDay(key); err == nil && n >= lim.PerPrincipalDay {
		over = fmt.Sprintf("%s stored %s of receipts (their search index included) in the last 24 hours, its budget storage.per_principal_day (%s)", caller.GetName(), domain.BytesWord(n), domain.BytesWord(lim.PerPrincipalDay))
		if lim.OverBudget != "tail" {
			return "", errdefs.Exhausted("%s: new executions are refused until older ones are a day old; produce less output, or ask an operator to raise storage.per_principal_day", over)
		}
	} else if n, err := h.storedDay(""); err == nil && n >= lim.GlobalDay {
		over = fmt.Sprintf("termd stored %s of receipts (their search index included) in the last 24 hours, its budget storage.global_day (%s)", domain.BytesWord(n), domain.BytesWord(lim.GlobalDay))
		if lim.OverBudget != "tail" {
			return "", errdefs.Exhausted("%s: new executions are refused until older ones are a day old; ask an operator to raise storage.global_day", over)
		}
	}
	if over == "" {
		return "", nil
	}
	return fmt.Sprintf("%s: only the last %s of each output stream is kept (storage.over_budget: tail); the full streams are counted and hashed", over, domain.BytesWord(lim.TailBytes)), nil
}

// PlanStorageAllows refuses a new plan when its caller is past its daily
// budget (storage.per_principal_day) and storage.over_budget is refuse:
// every plan may end in a receipt (blocked, denied, expired ones too), so
// plans that are never run must not fill the store either. Other
// principals, and the global budget, are not its concern: a flood
// degrades only its sender.
func (h *FS) PlanStorageAllows(caller *termdv1.Principal) error {
	lim := h.Config().Storage
	if h.Store == nil || lim.OverBudget == "tail" {
		return nil
	}
	if n, err := h.storedDay(domain.PrincipalKey(caller)); err == nil && n >= lim.PerPrincipalDay {
		return errdefs.Exhausted("%s stored %s of receipts (their search index included) in the last 24 hours, its budget storage.per_principal_day (%s): new plans and executions are refused until older receipts are a day old; ask an operator to raise storage.per_principal_day", caller.GetName(), domain.BytesWord(n), domain.BytesWord(lim.PerPrincipalDay))
	}
	return nil
}

// storedDay is what a requester (principalKey; "" = everyone) stored in the
// last 24 hours as the budgets count it: its receipts' bytes, and the
// search index's share of them (indexShare).
func (h *FS) storedDay(requester string) (int64, error) {
	n, err := h.Store.StoredSince(requester, time.Now().Add(-24*time.Hour))
	if err != nil {
		return 0, err
	}
	return n + int64(float64(n)*h.indexShare()), nil
}

// indexShare is the search index's size per byte of receipts the store
// holds. The index is derived from the receipts (their command, reasons and
// output, indexed by trigram: often larger than the text), so the budgets
// count each byte of receipt as 1+share bytes: whoever fills the store pays
// for the index too. Both sizes are known without reading the data (the
// index's page count; the store keeps its total). A share above
// maxIndexShare is taken as maxIndexShare: a tiny store's figure says
// little.
func (h *FS) indexShare() float64 {
	if h.Search == nil {
		return 0
	}
	total, err := h.Store.TotalBytes()
	if err != nil || total <= 0 {
		return 0
	}
	return min(maxIndexShare, float64(h.Search.Bytes())/float64(total))
}

const maxIndexShare = 4

// StorageUsage is what the budgets are measured against now.
func (h *FS) StorageUsage() (free, storedDay int64) {
	free, _ = freeBytes(h.Config().StateDir)
	if h.Store != nil {
		storedDay, _ = h.storedDay("")
	}
	return free, storedDay
}

func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize)), nil
}
