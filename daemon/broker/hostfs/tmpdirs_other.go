//go:build !linux

package hostfs

import "errors"

// renameNoReplace is Linux's renameat2(RENAME_NOREPLACE); elsewhere a spare
// is not used (the directory is made on the spot).
func renameNoReplace(string, string) error {
	return errors.ErrUnsupported
}
