package hostfs

import "golang.org/x/sys/unix"

// renameNoReplace renames from to to, failing when to exists (a plain
// rename would replace an empty directory there).
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}
