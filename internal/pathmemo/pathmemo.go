// Package pathmemo remembers, for one execution, what each path it was
// asked about was: Lstat's answer, and a symlink's target. The policy's
// re-check and the sandbox both resolve termd's own files and their parents
// (the state directory's, the socket's): one memo shared by the two looks at
// each once. A memo lives for one execution only and is never kept beyond
// it, so every execution looks at the file system again.
package pathmemo

import "os"

// Memo maps a path to what Lstat (and Readlink) said of it. A nil Memo
// remembers nothing: it looks every time.
type Memo map[string]Entry

// Entry is what Lstat (and Readlink, for a symlink) said of a path.
type Entry struct {
	Err    error // Lstat's error
	Dir    bool
	Link   bool
	Target string // a link's target ("" when Readlink failed)
	// TargetErr is Readlink's error, for a link.
	TargetErr error
}

// Lstat is what Lstat (and Readlink) said of p, asking once per memo.
func (m Memo) Lstat(p string) Entry {
	if e, ok := m[p]; ok {
		return e
	}
	var e Entry
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		e.Err = err
	case fi.Mode()&os.ModeSymlink != 0:
		e.Link = true
		e.Target, e.TargetErr = os.Readlink(p)
	default:
		e.Dir = fi.IsDir()
	}
	if m != nil {
		m[p] = e
	}
	return e
}
