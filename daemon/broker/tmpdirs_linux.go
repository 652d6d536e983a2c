package broker

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from to to, failing when to exists (a plain
// rename would replace an empty directory there).
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}

var errUnusual = errors.New("not the directory its execution was given")

// recycleTmp empties dir, an ended execution's TMPDIR whose processes are
// all gone, and renames it to spare, termd's and 0700 again. It fails (and
// the caller removes it) unless dir is still what its execution was given:
// a 0700 directory of uid:gid (no set-id or sticky bit) without extended
// attributes (an ACL is one). A root termd makes it root's before reading
// it, so nothing of its user's (a descriptor passed to a process outside
// the execution) can add to it meanwhile or enter it later; what the
// command left is removed without following a symbolic link, as
// os.RemoveAll does.
func recycleTmp(dir, spare string, uid, gid int) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode != unix.S_IFDIR|0o700 || int(st.Uid) != uid || int(st.Gid) != gid {
		return errUnusual
	}
	if os.Geteuid() == 0 {
		if err := unix.Fchown(fd, 0, 0); err != nil {
			return err
		}
	}
	if n, err := unix.Flistxattr(fd, nil); err != nil || n > 0 {
		return errUnusual
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		err := unix.Unlinkat(fd, name, 0)
		if errors.Is(err, unix.EISDIR) {
			err = os.RemoveAll(filepath.Join(dir, name))
		}
		if err != nil {
			return err
		}
	}
	return renameNoReplace(dir, spare)
}
