package safefs

import (
	"errors"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 proved missing (ENOSYS, or refused by a
// container's seccomp filter): the per-component walk is used from then on.
var noOpenat2 atomic.Bool

// openBeneath opens rel (clean, relative, without "." or "..") below dirfd
// as a directory, following no symbolic link and no magic link and never
// leaving dirfd's tree.
func openBeneath(dirfd int, rel string) (int, error) {
	if !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		for attempt := 0; ; attempt++ {
			fd, err := unix.Openat2(dirfd, rel, &how)
			if errors.Is(err, unix.EAGAIN) && attempt < 8 {
				continue // a rename raced the lookup: the kernel asks to retry
			}
			if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
				noOpenat2.Store(true)
				break
			}
			if errors.Is(err, unix.EAGAIN) {
				break
			}
			return fd, err
		}
	}
	return openWalk(dirfd, rel)
}
