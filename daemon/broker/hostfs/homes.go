package hostfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/internal/safefs"
)

// Where the commands' private homes live, and how termd works in them.
//
// The base (<state>-home, e.g. /var/lib/termd-home) holds one HOME per uid
// (<base>/<uid>, owned by that uid) and the executions' TMPDIRs
// (<base>/.tmp/<execution>, owned by the command's user). The base and
// <base>/.tmp are termd's own and written by termd only; everything below a
// HOME or a TMPDIR is the principal's, so termd's work there goes through
// safefs: descriptors, never a path a principal could redirect with a link
// or a swapped directory.
//
// The base is a sibling of the state directory, not inside it: the state
// directory is covered as a whole in every execution's mount namespace when
// a command could reach it (a state directory inside a workspace, `make
// run`), which would cover the homes too. A sibling is used only when nobody
// but root or termd's user can create entries beside the state directory
// (its parent is theirs and not writable by group or others) and it is
// outside every workspace; otherwise (the state directory inside a
// workspace, or in a world-writable directory such as /tmp) the base is a
// directory termd makes under a name nobody can predict in the system's
// temporary directory (termd-home-<euid>-<random>) and records in
// <state>/home-base, reused at the next start only while it is still a
// directory of termd's user that nobody else can write. A name another user
// made first is never adopted and never blocks executions: a new one is made.

// homeBaseRecord is the file in the state directory naming the private base.
const homeBaseRecord = "home-base"

type homeBaseCache struct {
	mu      sync.Mutex
	key     string // the state directory and workspaces it was chosen for
	base    string
	private bool // made under a random name in the temporary directory
}

// Base is the directory that holds the commands' private homes and their
// temporary directories.
func (h *FS) Base() string {
	cfg := h.Config()
	sibling := cfg.StateDir + "-home"
	key := cfg.StateDir + "\x00" + strings.Join(cfg.Workspaces, "\x00")
	c := &h.homes
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == key && c.base != "" {
		return c.base
	}
	c.key, c.private = key, false
	c.base = sibling
	if !siblingUsable(sibling, cfg.Workspaces) {
		c.base, c.private = h.privateHomeBase(cfg.StateDir, ""), true
	}
	return c.base
}

// siblingUsable says whether the sibling base <state>-home may hold the
// homes: outside every workspace, in a directory only termd can write.
func siblingUsable(sibling string, workspaces []string) bool {
	return !domain.InsideAny(sibling, workspaces) && onlyTermdWrites(filepath.Dir(sibling))
}

// HomeBase is where termd keeps the commands' private homes and TMPDIRs
// for a state directory and workspaces, as it would choose it, making
// nothing (for termd doctor): the sibling <state>-home, or, private, the
// base recorded in <state>/home-base ("" when none was made yet; termd
// makes one under a random name in the temporary directory).
func HomeBase(stateDir string, workspaces []string) (base string, private bool) {
	sibling := stateDir + "-home"
	if siblingUsable(sibling, workspaces) {
		return sibling, false
	}
	data, err := os.ReadFile(filepath.Join(stateDir, homeBaseRecord))
	if err != nil {
		return "", true
	}
	return strings.TrimSpace(string(data)), true
}

// onlyTermdWrites says whether dir is a directory owned by root or termd's
// user that neither group nor others can write (so nobody else can create,
// link or rename entries in it).
func onlyTermdWrites(dir string) bool {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && (sys.Uid == 0 || int(sys.Uid) == os.Geteuid()) && st.Mode().Perm()&0o022 == 0
}

// privateHomeBase is the recorded private base when it is still termd's,
// else a new one (bad: the one just found unusable, never used again).
func (h *FS) privateHomeBase(stateDir, bad string) string {
	record := filepath.Join(stateDir, homeBaseRecord)
	if data, err := os.ReadFile(record); err == nil {
		p := strings.TrimSpace(string(data))
		if p != bad && filepath.IsAbs(p) && filepath.Dir(p) == filepath.Clean(os.TempDir()) && usableBase(p) {
			return p
		}
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("termd-home-%d-", os.Geteuid()))
	if err != nil {
		// HomeFor reports the failure to make a home in it.
		return filepath.Join(os.TempDir(), fmt.Sprintf("termd-home-%d-unavailable", os.Geteuid()))
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		h.Log.Warn("setting the mode of the commands' home base", "dir", dir, "error", err)
	}
	if err := writeFileAtomic(record, []byte(dir+"\n"), 0o600); err != nil {
		h.Log.Warn("recording the commands' home base (a new one is made at the next start)", "file", record, "error", err)
	}
	h.Log.Info("commands' homes are kept in a private directory", "dir", dir,
		"why", "the directory beside the state directory is inside a workspace or could be created by another user")
	return dir
}

// usableBase: a directory (not a link) of termd's user that nobody else can
// write.
func usableBase(p string) bool {
	d, err := safefs.Open(p, os.Geteuid())
	if err != nil {
		return false
	}
	defer d.Close()
	in, err := d.Stat()
	return err == nil && in.Mode&0o022 == 0
}

// writeFileAtomic writes a file of termd's own in one of its directories.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// HomeFor returns a HOME for commands run for uid: outside every workspace
// and outside the (private) state directory, private to that uid, in the
// base of the commands' homes, traversable but not listable.
// <base>/<uid> is an entry of termd's own directory (nobody else can put a
// link there); its owner is set through its descriptor, and only when it
// differs: a chown that changes nothing still writes the inode (its ctime)
// through the file system's journal, at every execution.
func (h *FS) HomeFor(uid, gid int) (string, error) {
	base, err := h.openHomeBase()
	if err != nil {
		return "", err
	}
	defer base.Close()
	d, _, err := base.Mkdir(fmt.Sprint(uid), 0o700)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if os.Geteuid() == 0 {
		in, err := d.Stat()
		if err != nil {
			return "", err
		}
		if in.Uid != uid || in.Gid != gid {
			if err := d.Chown(uid, gid); err != nil {
				return "", err
			}
		}
	}
	return d.Path(), nil
}

// openHomeBase opens (making it when missing) the base of the commands'
// homes: a directory of termd's user, mode 0711 (traversable, not
// listable). A private base found unusable (another user's directory or a
// link where termd's was) is replaced by a new one rather than refused.
func (h *FS) openHomeBase() (*safefs.Dir, error) {
	base := h.Base()
	d, err := openBaseDir(base)
	if err == nil {
		return d, nil
	}
	c := &h.homes
	c.mu.Lock()
	if !c.private || c.base != base {
		c.mu.Unlock()
		return nil, fmt.Errorf("refusing %s as the base of command homes: %w", base, err)
	}
	c.base = h.privateHomeBase(h.Config().StateDir, base)
	base = c.base
	c.mu.Unlock()
	d, err = openBaseDir(base)
	if err != nil {
		return nil, fmt.Errorf("refusing %s as the base of command homes: %w", base, err)
	}
	return d, nil
}

// openBaseDir makes (or opens) dir in its parent, checks it is a directory
// of termd's user and sets its mode to 0711 when it differs (a chmod that
// changes nothing still writes the inode, at every execution).
func openBaseDir(dir string) (*safefs.Dir, error) {
	parent, err := safefs.Open(filepath.Dir(dir), -1)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	return makeOwnDir(parent, filepath.Base(dir))
}

// makeOwnDir makes (or opens) name in parent, a directory of termd's own,
// mode 0711.
func makeOwnDir(parent *safefs.Dir, name string) (*safefs.Dir, error) {
	d, _, err := parent.Mkdir(name, 0o711)
	if err != nil {
		return nil, err
	}
	if err := fixBaseDir(d); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// fixBaseDir: d must be termd's user's; its mode becomes 0711.
func fixBaseDir(d *safefs.Dir) error {
	in, err := d.Stat()
	if err != nil {
		return err
	}
	if in.Uid != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not termd's user (%d)", d.Path(), in.Uid, os.Geteuid())
	}
	if in.Mode != 0o711 {
		return d.Chmod(0o711)
	}
	return nil
}

// openTmpBase opens (making it when missing) <base>/.tmp, termd's directory
// of the executions' TMPDIRs.
func (h *FS) openTmpBase() (*safefs.Dir, error) {
	base, err := h.openHomeBase()
	if err != nil {
		return nil, err
	}
	defer base.Close()
	return makeOwnDir(base, ".tmp")
}

// RemoveTmp removes an execution's TMPDIR (its user's tree) through the
// descriptor of termd's .tmp directory, following no link in it.
func (h *FS) RemoveTmp(name string) error {
	if !filepath.IsLocal(name) || strings.ContainsRune(name, filepath.Separator) {
		return fmt.Errorf("%q is not an execution's TMPDIR name", name)
	}
	d, err := h.openTmpBase()
	if err != nil {
		return err
	}
	defer d.Close()
	return d.RemoveAll(name)
}

// cacheOwner is who owns what termd makes in a principal's HOME for uid: the
// principal when termd is root (it gives it away), else termd's own user.
func cacheOwner(uid, gid int) (int, int, int) {
	if os.Geteuid() == 0 {
		return uid, uid, gid
	}
	return os.Geteuid(), -1, -1
}

// MkdirOwned makes rel (e.g. ".cache/go-build") and its missing parents
// below home, owned by uid, through descriptors: a link or a directory
// swapped anywhere in the principal's HOME makes it fail, never redirects
// it. A component that exists must be a directory owned by uid.
func MkdirOwned(home, rel string, uid, gid int) error {
	want, cu, cg := cacheOwner(uid, gid)
	h, err := safefs.Open(home, want)
	if err != nil {
		return err
	}
	defer h.Close()
	d, err := h.MkdirAll(rel, 0o700, cu, cg)
	if err != nil {
		if errors.Is(err, safefs.ErrNotDir) || errors.Is(err, safefs.ErrOwner) {
			return fmt.Errorf("%w; remove it from the private HOME (termd makes the directory itself)", err)
		}
		return err
	}
	return d.Close()
}
