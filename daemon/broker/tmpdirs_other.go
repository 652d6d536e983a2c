//go:build !linux

package broker

import "errors"

// renameNoReplace is Linux's renameat2(RENAME_NOREPLACE); elsewhere a spare
// is not used (the directory is made on the spot).
func renameNoReplace(string, string) error {
	return errors.ErrUnsupported
}

// recycleTmp is Linux's; elsewhere an ended execution's TMPDIR is removed.
func recycleTmp(string, string, int, int) error {
	return errors.ErrUnsupported
}
