package hostfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Each execution's private TMPDIR (<home base>/.tmp/<execution>) is a new
// directory. Making one on the spot was ~0.2 ms of CPU in termd's profile of
// plan+execute pairs, on the critical path before the intent (a directory's
// inode and block, journalled, often behind the previous execution's
// removal); renaming a directory made ahead costs about a tenth. So, as the
// runner keeps network namespaces and cgroups made ahead, the broker keeps a
// few empty directories made ahead beside the executions' (TmpSpareCount,
// named .spare-<termd pid>-<n>, 0700 and owned by termd, like a new one
// before its chown). Each is used once: taken, renamed (never over an
// existing name) to the execution's and given to its user exactly as a new
// one; the spares are made again after an execution's receipt, between
// executions. A spare that cannot be taken is removed and the directory made
// as before.
const TmpSpareCount = 4

const SpareTag = ".spare-"

type tmpSpares struct {
	mu      sync.Mutex
	dirs    []string
	n       int
	filling bool
	closed  bool
}

// take returns a spare directory, or "" when there is none.
func (t *tmpSpares) take() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.dirs) == 0 {
		return ""
	}
	d := t.dirs[len(t.dirs)-1]
	t.dirs = t.dirs[:len(t.dirs)-1]
	return d
}

// makeTmp makes dir, an execution's TMPDIR in base, from a spare when one
// can be taken.
func (h *FS) makeTmp(dir string) error {
	if sp := h.tmpSpares.take(); sp != "" {
		if err := renameNoReplace(sp, dir); err == nil {
			return nil
		}
		_ = os.Remove(sp)
	}
	return os.Mkdir(dir, 0o700)
}

// PrivateTmp makes <home base>/.tmp/<execution> (from a spare made ahead),
// owned by the command's user and private to it. The base is termd's, so
// nobody can plant a link in it; the new directory is checked to be termd's
// own fresh one and given away through its descriptor.
func (h *FS) PrivateTmp(id string, uid, gid int) (string, error) {
	if !filepath.IsLocal(id) || strings.ContainsRune(id, filepath.Separator) {
		return "", fmt.Errorf("%q is not an execution id", id)
	}
	base, err := h.openTmpBase()
	if err != nil {
		return "", err
	}
	defer base.Close()
	if err := h.makeTmp(filepath.Join(base.Path(), id)); err != nil {
		return "", err
	}
	d, err := base.OpenDir(id, os.Geteuid())
	if err != nil {
		return "", err
	}
	defer d.Close()
	if os.Geteuid() == 0 {
		if err := d.Chown(uid, gid); err != nil {
			return "", err
		}
	}
	return d.Path(), nil
}

// RefillTmp makes spares until there are TmpSpareCount of them (one filler
// at a time; after Shutdown, none).
func (h *FS) RefillTmp() {
	t := &h.tmpSpares
	t.mu.Lock()
	if t.filling || t.closed {
		t.mu.Unlock()
		return
	}
	t.filling = true
	t.mu.Unlock()
	base := filepath.Join(h.Base(), ".tmp")
	for {
		t.mu.Lock()
		if t.closed || len(t.dirs) >= TmpSpareCount {
			t.filling = false
			t.mu.Unlock()
			return
		}
		t.n++
		dir := filepath.Join(base, fmt.Sprintf("%s%d-%d", SpareTag, os.Getpid(), t.n))
		t.mu.Unlock()
		err := os.Mkdir(dir, 0o700)
		t.mu.Lock()
		keep := err == nil && !t.closed
		if keep {
			t.dirs = append(t.dirs, dir)
		} else if err == nil {
			_ = os.Remove(dir) // shut down meanwhile
		}
		if !keep {
			t.filling = false
		}
		t.mu.Unlock()
		if !keep {
			return
		}
	}
}

// CloseTmpSpares removes the spares (termd is shutting down).
func (h *FS) CloseTmpSpares() {
	t := &h.tmpSpares
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, d := range t.dirs {
		_ = os.Remove(d)
	}
	t.dirs = nil
}

// RemoveStaleSpares removes spares left by a termd that is gone (a crash),
// or by an earlier one with this pid, at start.
func (h *FS) RemoveStaleSpares() {
	base := filepath.Join(h.Base(), ".tmp")
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	d, err := h.openTmpBase()
	if err != nil {
		return
	}
	defer d.Close()
	for _, ent := range ents {
		rest, ok := strings.CutPrefix(ent.Name(), SpareTag)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		if pid == os.Getpid() || errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = d.RemoveAll(ent.Name())
		}
	}
}
