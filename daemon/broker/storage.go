package broker

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// storageAllows refuses a new execution before anything is spawned when its
// receipt might not fit: the state directory's filesystem is below the free
// space floor, or the caller (or everyone) has stored its daily budget of
// receipts. Refusing up front keeps the audit promise: a command that runs
// always gets its signed receipt. The plan stays as it was, to run later.
// With storage.over_budget: tail, a spent daily budget lets the execution
// run and returns why its stored output is cut to a small tail instead.
func (b *Broker) storageAllows(caller *termdv1.Principal) (tail string, err error) {
	cfg := b.Config()
	lim := cfg.Storage
	if free, err := freeBytes(cfg.StateDir); err == nil && free < lim.MinFreeBytes {
		return "", errdefs.Exhausted("the state directory %s has %s free, below storage.min_free_bytes (%s): new executions are refused so receipts are never cut off by a full disk; free space there, prune old receipts (`termctl receipts prune --before DATE`), or lower storage.min_free_bytes", cfg.StateDir, bytesWord(free), bytesWord(lim.MinFreeBytes))
	}
	if b.Store == nil {
		return "", nil
	}
	since := time.Now().Add(-24 * time.Hour)
	key := principalKey(caller)
	over := ""
	if n, err := b.Store.StoredSince(key, since); err == nil && n >= lim.PerPrincipalDay {
		over = fmt.Sprintf("%s stored %s of receipts in the last 24 hours, its budget storage.per_principal_day (%s)", caller.GetName(), bytesWord(n), bytesWord(lim.PerPrincipalDay))
		if lim.OverBudget != "tail" {
			return "", errdefs.Exhausted("%s: new executions are refused until older ones are a day old; produce less output, or ask an operator to raise storage.per_principal_day", over)
		}
	} else if n, err := b.Store.StoredSince("", since); err == nil && n >= lim.GlobalDay {
		over = fmt.Sprintf("termd stored %s of receipts in the last 24 hours, its budget storage.global_day (%s)", bytesWord(n), bytesWord(lim.GlobalDay))
		if lim.OverBudget != "tail" {
			return "", errdefs.Exhausted("%s: new executions are refused until older ones are a day old; ask an operator to raise storage.global_day", over)
		}
	}
	if over == "" {
		return "", nil
	}
	return fmt.Sprintf("%s: only the last %s of each output stream is kept (storage.over_budget: tail); the full streams are counted and hashed", over, bytesWord(lim.TailBytes)), nil
}

// StorageUsage is what the budgets are measured against now.
func (b *Broker) StorageUsage() (free, storedDay int64) {
	free, _ = freeBytes(b.Config().StateDir)
	if b.Store != nil {
		storedDay, _ = b.Store.StoredSince("", time.Now().Add(-24*time.Hour))
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

func bytesWord(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
