package executions

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/termd/termd/daemon/errdefs"
)

// StdinFile opens a command's standard input: data, written to a new 0600
// file owned by the command's user (uid, gid) in its private TMPDIR (as
// credential files are: O_CREAT|O_EXCL|O_NOFOLLOW), opened again read-only
// and checked to be that file, and unlinked, so the command reads it on
// descriptor 0 and finds nothing of it in TMPDIR.
func StdinFile(data []byte, tmp string, uid, gid int) (*os.File, error) {
	path := filepath.Join(tmp, "termd-stdin")
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, errdefs.Internal("writing stdin to the execution's TMPDIR: %v", err)
	}
	defer os.Remove(path)
	defer w.Close()
	if os.Geteuid() == 0 {
		if err := w.Chown(uid, gid); err != nil {
			return nil, errdefs.Internal("writing stdin to the execution's TMPDIR: %v", err)
		}
	}
	if _, err := w.Write(data); err != nil {
		return nil, errdefs.Internal("writing stdin to the execution's TMPDIR: %v", err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, errdefs.Internal("opening the execution's stdin: %v", err)
	}
	// The command's user owns TMPDIR: the file read must be the one written.
	wst, werr := w.Stat()
	rst, rerr := f.Stat()
	if werr != nil || rerr != nil || !os.SameFile(wst, rst) {
		f.Close()
		return nil, errdefs.Internal("the execution's stdin file %s was replaced before the command started", path)
	}
	return f, nil
}
