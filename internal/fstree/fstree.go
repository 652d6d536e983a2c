//go:build unix

// Package fstree records a directory tree's names, owners and modes, for
// tests that check a tree was left exactly as it was (nothing created,
// chowned, chmodded or removed).
package fstree

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
)

// Entry is one name's owner, group and mode (type bits included).
type Entry struct{ Uid, Gid, Mode uint32 }

// Snapshot is every name below dir (dir included), links not followed.
func Snapshot(dir string) (map[string]Entry, error) {
	out := map[string]Entry{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		out[p] = Entry{st.Uid, st.Gid, uint32(st.Mode)}
		return nil
	})
	return out, err
}

// Changes says, one line each, what after has that before had not, lost, or
// has with another owner or mode; none means the tree is as it was.
func Changes(before, after map[string]Entry) []string {
	var out []string
	for p, v := range after {
		if w, ok := before[p]; !ok {
			out = append(out, fmt.Sprintf("%s was created (uid %d, mode %o)", p, v.Uid, v.Mode))
		} else if w != v {
			out = append(out, fmt.Sprintf("%s changed: uid %d gid %d mode %o, was uid %d gid %d mode %o", p, v.Uid, v.Gid, v.Mode, w.Uid, w.Gid, w.Mode))
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, p+" was removed")
		}
	}
	sort.Strings(out)
	return out
}

// Take is Snapshot for a test: a failure to read dir ends the test.
func Take(tb testing.TB, dir string) map[string]Entry {
	tb.Helper()
	s, err := Snapshot(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Unchanged reports every change between before and after as an error of
// the test, each prefixed with what.
func Unchanged(tb testing.TB, what string, before, after map[string]Entry) {
	tb.Helper()
	for _, c := range Changes(before, after) {
		tb.Errorf("%s: %s", what, c)
	}
}
