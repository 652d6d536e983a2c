//go:build unix

// Package safefs is how termd, running with privilege, works in directory
// trees that a less privileged principal can write (a command's private HOME
// and its build caches, its TMPDIR): never by path, always through
// descriptors, so that no symbolic link, and no directory renamed or swapped
// while termd works, can redirect it outside the tree.
//
// A Dir is a directory descriptor termd opened and checked. Paths below it
// are resolved relative to it with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) where the kernel has it, else
// one component at a time with openat(O_NOFOLLOW) (so no link is followed in
// either case, and ".." is refused); directories are made with mkdirat
// relative to the descriptor of their checked parent, then opened without
// following a link and given their owner and mode with fchown and fchmod on
// that descriptor. A directory that already exists is accepted only when its
// descriptor says it is a directory owned by the expected user. Trees are
// removed with unlinkat relative to descriptors opened O_NOFOLLOW, never
// descending through a link or into another file system.
package safefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is an open directory. Its methods never follow a symbolic link.
type Dir struct {
	fd   int
	path string // for messages only; never used to reach the directory
}

// Info is what a descriptor says about its directory.
type Info struct {
	Uid, Gid int
	Mode     uint32 // permission and set-id/sticky bits
	Dev, Ino uint64
}

// ErrNotDir is returned (wrapped, with the path) when a path component is a
// symbolic link, is not a directory, or would leave the tree.
var ErrNotDir = errors.New("not a plain directory (a symbolic link, another kind of file, or outside the tree)")

// ErrOwner is returned (wrapped) when an existing directory has another owner.
var ErrOwner = errors.New("owned by another user")

// Open opens path, which must be absolute, as a directory, without following
// a link at its last component. The components above it are followed: they
// must be under termd's (or the operator's) control. uid >= 0 requires the
// directory to be owned by uid.
func Open(path string, uid int) (*Dir, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%s: not an absolute path", path)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathErr(path, err)
	}
	d := &Dir{fd: fd, path: path}
	if err := d.checkOwner(uid); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Path is the path the directory was reached by, for messages.
func (d *Dir) Path() string { return d.path }

// Fd is the descriptor (owned by d).
func (d *Dir) Fd() int { return d.fd }

// Close closes the descriptor.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Stat is what the descriptor says.
func (d *Dir) Stat() (Info, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return Info{}, pathErr(d.path, err)
	}
	return info(&st), nil
}

func info(st *unix.Stat_t) Info {
	return Info{Uid: int(st.Uid), Gid: int(st.Gid), Mode: uint32(st.Mode) & 0o7777, Dev: uint64(st.Dev), Ino: uint64(st.Ino)} //nolint:unconvert // Dev is 32-bit on darwin
}

// Chown changes the directory's owner through its descriptor (-1 keeps one).
func (d *Dir) Chown(uid, gid int) error { return pathErr(d.path, unix.Fchown(d.fd, uid, gid)) }

// Chmod changes the directory's mode through its descriptor.
func (d *Dir) Chmod(mode uint32) error { return pathErr(d.path, unix.Fchmod(d.fd, mode)) }

func (d *Dir) checkOwner(uid int) error {
	in, err := d.Stat()
	if err != nil {
		return err
	}
	if uid >= 0 && in.Uid != uid {
		return fmt.Errorf("%s is %w (uid %d, expected %d)", d.path, ErrOwner, in.Uid, uid)
	}
	return nil
}

// components splits a relative path into its names, refusing absolute
// paths, "." and "..": what is below d stays below d.
func components(rel string) ([]string, error) {
	if rel == "" || strings.HasPrefix(rel, "/") {
		return nil, fmt.Errorf("%q: not a relative path", rel)
	}
	var out []string
	for _, c := range strings.Split(rel, "/") {
		switch c {
		case "":
			continue
		case ".", "..":
			return nil, fmt.Errorf("%q: %q is not allowed in a path below a checked directory", rel, c)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q: not a relative path", rel)
	}
	return out, nil
}

func (d *Dir) join(rel string) string { return d.path + "/" + rel }

// OpenDir opens rel below d as a directory, following no link; uid >= 0
// requires it to be owned by uid.
func (d *Dir) OpenDir(rel string, uid int) (*Dir, error) {
	names, err := components(rel)
	if err != nil {
		return nil, err
	}
	rel = strings.Join(names, "/")
	fd, err := openBeneath(d.fd, rel)
	if err != nil {
		return nil, pathErr(d.join(rel), err)
	}
	sub := &Dir{fd: fd, path: d.join(rel)}
	if err := sub.checkOwner(uid); err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// openWalk opens rel below dirfd one component at a time, each with
// O_NOFOLLOW|O_DIRECTORY: no link is followed anywhere.
func openWalk(dirfd int, rel string) (int, error) {
	cur := dirfd
	for _, name := range strings.Split(rel, "/") {
		fd, err := unix.Openat(cur, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if cur != dirfd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}

// MkdirAll makes rel below d and its missing parents, each with mode perm
// owned by uid:gid (-1 keeps termd's), and returns the last one opened.
//
// A directory that exists must be a directory (not a link) owned by uid.
// A directory termd makes is made with mkdirat in its parent's descriptor,
// opened again without following a link, checked to be the empty directory
// termd's own user just made (not one the principal swapped in meanwhile),
// and only then given its owner and mode through that descriptor.
func (d *Dir) MkdirAll(rel string, perm uint32, uid, gid int) (*Dir, error) {
	names, err := components(rel)
	if err != nil {
		return nil, err
	}
	want := uid
	if want < 0 {
		want = os.Geteuid()
	}
	parent, path := d.fd, d.path
	var cur *Dir
	for _, name := range names {
		next, err := mkdirOne(parent, path, name, perm, uid, gid, want)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur, parent, path = next, next.fd, next.path
	}
	return cur, nil
}

func mkdirOne(parent int, parentPath, name string, perm uint32, uid, gid, want int) (*Dir, error) {
	p := parentPath + "/" + name
	for attempt := 0; ; attempt++ {
		made := false
		err := unix.Mkdirat(parent, name, 0o700)
		switch {
		case err == nil:
			made = true
		case errors.Is(err, unix.EEXIST):
		default:
			return nil, pathErr(p, err)
		}
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && attempt < 3 {
			continue // removed meanwhile: make it again
		}
		if err != nil {
			return nil, pathErr(p, err)
		}
		sub := &Dir{fd: fd, path: p}
		in, err := sub.Stat()
		if err != nil {
			sub.Close()
			return nil, err
		}
		if !made {
			if in.Uid != want {
				sub.Close()
				return nil, fmt.Errorf("%s is %w (uid %d, expected %d)", p, ErrOwner, in.Uid, want)
			}
			return sub, nil
		}
		// The principal may have renamed termd's new directory away and put
		// one of its own (or another it could move) in its place between
		// mkdirat and openat: give owner and mode only to an empty directory
		// made by termd's user.
		if in.Uid != os.Geteuid() {
			sub.Close()
			return nil, fmt.Errorf("%s changed while termd made it (now owned by uid %d); refusing to use it", p, in.Uid)
		}
		if empty, err := isEmpty(fd); err != nil || !empty {
			sub.Close()
			if err == nil {
				err = fmt.Errorf("%s changed while termd made it (it is not empty); refusing to use it", p)
			}
			return nil, err
		}
		if (uid >= 0 && in.Uid != uid) || (gid >= 0 && in.Gid != gid) {
			if err := sub.Chown(uid, gid); err != nil {
				sub.Close()
				return nil, err
			}
		}
		if err := sub.Chmod(perm); err != nil {
			sub.Close()
			return nil, err
		}
		return sub, nil
	}
}

// isEmpty reads the directory through a duplicate of fd (the caller's
// descriptor keeps its offset and stays open).
func isEmpty(fd int) (bool, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(dup), ".")
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}

// Mkdir makes the single directory name in d, or opens it when it exists
// (a directory, not a link, of any owner), and reports whether it made it.
// Use it in directories only termd can write; the caller checks the owner.
// It opens first and makes only what is missing: a directory that exists
// (the common case: a HOME, the TMPDIRs' base, at every execution) costs
// one open, not a refused mkdirat and an open.
func (d *Dir) Mkdir(name string, perm uint32) (*Dir, bool, error) {
	if names, err := components(name); err != nil || len(names) != 1 {
		return nil, false, fmt.Errorf("%q: not a single file name", name)
	}
	p := d.join(name)
	const open = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	made := false
	fd, err := unix.Openat(d.fd, name, open, 0)
	if errors.Is(err, unix.ENOENT) {
		made = true
		if err := unix.Mkdirat(d.fd, name, perm); errors.Is(err, unix.EEXIST) {
			made = false
		} else if err != nil {
			return nil, false, pathErr(p, err)
		}
		fd, err = unix.Openat(d.fd, name, open, 0)
	}
	if err != nil {
		return nil, false, pathErr(p, err)
	}
	sub := &Dir{fd: fd, path: p}
	if made {
		// mkdirat's mode went through the umask.
		if err := sub.Chmod(perm); err != nil {
			sub.Close()
			return nil, false, err
		}
	}
	return sub, made, nil
}

// RemoveAll removes name, a single entry of d, and everything below it. It
// unlinks relative to descriptors it opened with O_NOFOLLOW, so a link in the
// tree is removed, never followed, and a directory swapped for a link while
// it works is not entered; it does not descend into another file system.
func (d *Dir) RemoveAll(name string) error {
	if names, err := components(name); err != nil || len(names) != 1 {
		return fmt.Errorf("%q: not a single file name", name)
	}
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return pathErr(d.path, err)
	}
	return removeAllAt(d.fd, uint64(st.Dev), d.join(name), name) //nolint:unconvert // Dev is 32-bit on darwin
}

// removePasses bounds how often one directory is read again while entries
// keep appearing in it (someone writing into the tree while it is removed).
const removePasses = 64

func removeAllAt(parent int, dev uint64, p, name string) error {
	var first error
	for pass := 0; pass < removePasses; pass++ {
		err := unix.Unlinkat(parent, name, 0)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
			return pathErr(p, err)
		}
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			continue // swapped for a link or a file: unlink that
		case err != nil:
			return pathErr(p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return pathErr(p, err)
		}
		if uint64(st.Dev) != dev { //nolint:unconvert // Dev is 32-bit on darwin
			unix.Close(fd)
			return fmt.Errorf("%s is on another file system (a mount point); not removing it", p)
		}
		f := os.NewFile(uintptr(fd), p)
		for {
			names, rerr := f.Readdirnames(1024)
			for _, n := range names {
				if err := removeAllAt(fd, dev, p+"/"+n, n); err != nil && first == nil {
					first = err
				}
			}
			if rerr != nil || len(names) == 0 {
				break
			}
		}
		f.Close()
		err = unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if first != nil {
			return first
		}
		if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
			return pathErr(p, err)
		}
	}
	return fmt.Errorf("%s: entries kept appearing while it was removed", p)
}

func pathErr(p string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("%s: %w", p, ErrNotDir)
	}
	return &os.PathError{Op: "safefs", Path: p, Err: err}
}
