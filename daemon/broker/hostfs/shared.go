package hostfs

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// sharedDir is where LinkShared keeps its files, in the base of the
// commands' homes: termd's own, mode 0700.
const sharedDir = ".shared"

// errNotShared: the file cannot be shared with this command.
var errNotShared = errors.New("not shared: termd is not root, or the command is")

// LinkShared puts at dir/name a hard link to a file of termd's holding
// body: root's, mode 0644, made once per uid and body in <home base>/.shared
// and linked into each execution's private TMPDIR (dir), where a new file
// per execution cost an inode's allocation and, after the run, its freeing
// (~4% of termd's CPU per execution of pwd; a link and its removal ~a
// quarter of that). Only for a root termd and a command that is not root:
// the command can read the file and not change it (another user's, no
// write bit for it), so nothing it does reaches a later execution through
// it; in its own TMPDIR it may remove or replace the link, as it could its
// own file. An error says nothing was linked (the caller writes its own).
func (h *FS) LinkShared(dir, name, body string, uid int) error {
	if os.Geteuid() != 0 || uid == 0 {
		return errNotShared
	}
	sum := sha256.Sum256([]byte(body))
	src := filepath.Join(h.Base(), sharedDir, strconv.Itoa(uid)+"-"+fmt.Sprintf("%x", sum[:16]))
	dst := filepath.Join(dir, name)
	err := unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, 0)
	if !errors.Is(err, unix.ENOENT) {
		return err
	}
	if err := h.makeShared(filepath.Base(src), body); err != nil {
		return err
	}
	return unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, 0)
}

// makeShared writes <home base>/.shared/name (root's, 0644) holding body,
// complete and durable before it has its name.
func (h *FS) makeShared(name, body string) error {
	h.shared.Lock()
	defer h.shared.Unlock()
	base, err := h.openHomeBase()
	if err != nil {
		return err
	}
	defer base.Close()
	d, _, err := base.Mkdir(sharedDir, 0o700)
	if err != nil {
		return err
	}
	defer d.Close()
	if in, err := d.Stat(); err != nil || in.Uid != 0 || in.Mode != 0o700 {
		return fmt.Errorf("%s is not root's private directory (%+v, %v)", d.Path(), in, err)
	}
	tmp := name + ".new"
	_ = unix.Unlinkat(d.Fd(), tmp, 0) // left by a crash
	fd, err := unix.Openat(d.Fd(), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.Path(), tmp))
	err = f.Chmod(0o644) // the umask applied to the open
	if err == nil {
		_, err = f.WriteString(body)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(d.Fd(), tmp, d.Fd(), name)
	}
	if err != nil {
		_ = unix.Unlinkat(d.Fd(), tmp, 0)
	}
	return err
}
