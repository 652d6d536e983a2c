package hostfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/config"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Workspace reads run inside the daemon (as root when termd is root), so they
// must serve only what the caller could read itself. When termd is root the
// opens run on a thread holding the caller's filesystem credentials
// (asCaller), so the kernel decides — mode bits, POSIX ACLs (a named-user
// deny included), everything it knows. Otherwise (a per-user termd, macOS)
// the caller's mode bits are checked on each descriptor opened.

func callerIDs(p *termdv1.Principal) (uid uint32, gids map[uint32]bool) {
	uid = p.GetUid()
	gids = map[uint32]bool{p.GetGid(): true}
	if a, err := config.LookupUID(uid); err == nil {
		for _, g := range a.Groups {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				gids[uint32(n)] = true
			}
		}
	}
	return uid, gids
}

// errNotReadable says the caller could not have read the file itself.
var errNotReadable = errors.New("not readable by the caller")

// errCredSwitch says the kernel did not let termd take on the caller's credentials.
var errCredSwitch = errors.New("termd could not take on the caller's filesystem credentials to check its access")

// allowAll is the descriptor check when the kernel has already checked the
// caller's access on open.
func allowAll(int, uint32) error { return nil }

// openAsCaller opens real for reading with the caller's rights (see openWalk).
func openAsCaller(p *termdv1.Principal, real string) (f *os.File, err error) {
	ran, cerr := asCaller(p, func() { f, err = openWalk(real, allowAll) })
	if cerr != nil {
		return nil, cerr
	}
	if ran {
		return f, err
	}
	return openWalk(real, newFDAccess(p).allowed)
}

// openWalk opens real (an absolute, fully resolved path) for reading the
// way the caller would reach it, without a race: each component is opened
// relative to the previous one with O_NOFOLLOW, so a directory swapped for a
// symlink after real was resolved is refused instead of followed, and every
// directory actually traversed (and the file itself) is checked against the
// caller's rights with may on the open descriptor (or by the kernel, when
// running under asCaller). O_NONBLOCK keeps a FIFO from hanging the daemon;
// the caller checks the file is regular.
func openWalk(real string, may func(fd int, want uint32) error) (*os.File, error) {
	if !filepath.IsAbs(real) {
		return nil, fmt.Errorf("%s is not absolute", real)
	}
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(strings.Trim(filepath.Clean(real), "/"), "/")
	for i, name := range parts {
		if err := may(fd, 1); err != nil {
			unix.Close(fd)
			return nil, err
		}
		flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
		if i < len(parts)-1 {
			flags |= unix.O_DIRECTORY
		} else {
			flags |= unix.O_NONBLOCK | unix.O_NOCTTY
		}
		next, err := unix.Openat(fd, name, flags, 0)
		unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return nil, fmt.Errorf("%s changed while it was opened (a symlink appeared on the way)", real)
			}
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				return nil, errNotReadable // the kernel's answer for the caller
			}
			return nil, &os.PathError{Op: "open", Path: real, Err: err}
		}
		fd = next
	}
	if err := may(fd, 4); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), real), nil
}

// fdAccess checks a caller's permission bits on open descriptors.
type fdAccess struct {
	check bool
	uid   uint32
	gids  map[uint32]bool
}

func newFDAccess(p *termdv1.Principal) fdAccess {
	a := fdAccess{check: p.GetUid() != 0}
	if a.check {
		a.uid, a.gids = callerIDs(p)
	}
	return a
}

// allowed says whether the caller has the bits want (4 read, 1 search) on fd.
func (a fdAccess) allowed(fd int, want uint32) error {
	if !a.check {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	perm := uint32(st.Mode) & 0o777
	var ok bool
	switch {
	case st.Uid == a.uid:
		ok = perm&(want<<6) == want<<6
	case a.gids[st.Gid]:
		ok = perm&(want<<3) == want<<3
	default:
		ok = perm&want == want
	}
	if !ok {
		return errNotReadable
	}
	return nil
}

// walkAsCaller lists the regular files below root in name order using
// descriptors only: each directory is opened relative to its parent with
// O_NOFOLLOW|O_DIRECTORY and must be readable and searchable by the caller
// on that descriptor, so a directory swapped for a symlink mid-walk is never
// followed. skip prunes directories; visit returns false to stop.
func walkAsCaller(p *termdv1.Principal, root string, skip func(path, name string) bool, visit func(path string, size int64) bool) (err error) {
	ran, cerr := asCaller(p, func() { err = walk(root, fdAccess{}, skip, visit) })
	if cerr != nil {
		return cerr
	}
	if ran {
		return err
	}
	return walk(root, newFDAccess(p), skip, visit)
}

func walk(root string, acc fdAccess, skip func(path, name string) bool, visit func(path string, size int64) bool) error {
	f, err := openWalk(root, acc.allowed)
	if err != nil {
		return err
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return fmt.Errorf("%s is not a directory", root)
	}
	_, err = walkFD(acc, fd, root, skip, visit)
	return err
}

// walkFD walks the directory open at fd (and closes it); it reports whether to go on.
func walkFD(acc fdAccess, fd int, path string, skip func(path, name string) bool, visit func(path string, size int64) bool) (bool, error) {
	dir := os.NewFile(uintptr(fd), path)
	defer dir.Close()
	if acc.allowed(fd, 5) != nil {
		return true, nil // not listable by the caller: as if empty
	}
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return true, nil
	}
	sort.Strings(names)
	for _, name := range names {
		child := filepath.Join(path, name)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if skip(child, name) {
				continue
			}
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // gone, or swapped for a symlink: not followed
			}
			if goOn, err := walkFD(acc, cfd, child, skip, visit); err != nil || !goOn {
				return goOn, err
			}
		case unix.S_IFREG:
			if !visit(child, st.Size) {
				return false, nil
			}
		}
	}
	return true, nil
}
