package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/termd/termd/internal/pathmemo"
)

// realPaths resolves absolute paths as filepath.EvalSymlinks does,
// remembering what each component it looked at was (Lstat, and a link's
// target): termd's own files, which every execution hides, share their
// parents (the state directory's, the socket's), and EvalSymlinks looked at
// each of those again for each file, at every execution. A memo serves one
// execution only (its policy re-check's, Paths.Memo, or one Prepare's), so
// the files are looked at again for the next execution, and all of one
// execution's resolutions see one moment of the file system.
type realPaths pathmemo.Memo

// realComponent is what Lstat (and Readlink, for a link) said of a path.
type realComponent struct {
	err    error
	dir    bool
	link   bool
	target string
}

func (m realPaths) lstat(p string) realComponent {
	e := pathmemo.Memo(m).Lstat(p)
	c := realComponent{err: e.Err, dir: e.Dir, link: e.Link, target: e.Target}
	if e.Link {
		c.err = e.TargetErr
	}
	return c
}

// resolve is filepath.EvalSymlinks(p) for an absolute p: its real path, or
// the error of the first component that is missing, not a directory where
// one is needed, or too many links.
func (m realPaths) resolve(p string) (string, error) {
	cur, rest, links := "/", p, 0
	for rest != "" {
		var c string
		var more bool // a separator follows c: it must be a directory
		c, rest, more = strings.Cut(strings.TrimLeft(rest, "/"), "/")
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		rc := m.lstat(next)
		switch {
		case rc.err != nil:
			return "", rc.err
		case !rc.link:
			if !rc.dir && more {
				return "", &os.PathError{Op: "lstat", Path: next, Err: syscall.ENOTDIR}
			}
			cur = next
			continue
		}
		if links++; links > 255 {
			return "", errors.New("EvalSymlinks: too many links")
		}
		if filepath.IsAbs(rc.target) {
			cur = "/"
		}
		if more {
			rest = rc.target + "/" + rest
		} else {
			rest = rc.target
		}
	}
	return cur, nil
}
