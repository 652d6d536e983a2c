//go:build linux

package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/internal/fstree"
)

// both runs f with openat2 and with the per-component walk.
func both(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", func(t *testing.T) { f(t) })
	t.Run("walk", func(t *testing.T) {
		noOpenat2.Store(true)
		defer noOpenat2.Store(false)
		f(t)
	})
}

// tree is a principal's directory (tree/p) and a victim directory beside it
// (tree/victim, with a file and a subdirectory) that nothing may touch.
func tree(t *testing.T) (p, victim string) {
	dir := t.TempDir()
	p, victim = filepath.Join(dir, "p"), filepath.Join(dir, "victim")
	for _, d := range []string{p, filepath.Join(victim, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(victim, "file"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, victim
}

func open(t *testing.T, p string) *Dir {
	t.Helper()
	d, err := Open(p, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestMkdirAllMakesOwnedDirectories(t *testing.T) {
	both(t, func(t *testing.T) {
		p, _ := tree(t)
		uid, gid := os.Geteuid(), os.Getegid()
		if uid == 0 {
			uid, gid = 65534, 65534
		}
		old := syscall.Umask(0o077)
		defer syscall.Umask(old)
		d, err := open(t, p).MkdirAll("a/b/c", 0o750, uid, gid)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if d.Path() != p+"/a/b/c" {
			t.Fatalf("path %s", d.Path())
		}
		for _, sub := range []string{"a", "a/b", "a/b/c"} {
			fi, err := os.Lstat(filepath.Join(p, sub))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if !fi.IsDir() || int(st.Uid) != uid || int(st.Gid) != gid || fi.Mode().Perm() != 0o750 {
				t.Fatalf("%s: %v uid %d gid %d, want a 0750 directory of %d:%d", sub, fi.Mode(), st.Uid, st.Gid, uid, gid)
			}
		}
		// Again: everything exists and is the principal's.
		d2, err := open(t, p).MkdirAll("a/b/c", 0o750, uid, gid)
		if err != nil {
			t.Fatalf("existing tree: %v", err)
		}
		d2.Close()
	})
}

func TestMkdirAllFollowsNoLink(t *testing.T) {
	both(t, func(t *testing.T) {
		p, victim := tree(t)
		// Links at each depth: the first component, a middle one, the last.
		if err := os.Symlink(victim, filepath.Join(p, "top")); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(p, "real"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(p, "real", "mid")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(victim, "sub"), filepath.Join(p, "real", "last")); err != nil {
			t.Fatal(err)
		}
		before := fstree.Take(t, victim)
		root := open(t, p)
		for _, rel := range []string{"top/sub/new", "top/new", "real/mid/sub/new", "real/last", "real/last/new", "../victim/new", "real/../../victim/new", "/etc"} {
			d, err := root.MkdirAll(rel, 0o700, -1, -1)
			if err == nil {
				d.Close()
				t.Errorf("MkdirAll(%s) went through a link", rel)
			}
		}
		if _, err := root.OpenDir("top", -1); !errors.Is(err, ErrNotDir) {
			t.Errorf("OpenDir through a link: %v, want ErrNotDir", err)
		}
		fstree.Unchanged(t, "victim", before, fstree.Take(t, victim))
	})
}

func TestMkdirAllRefusesAnotherOwnersDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a directory of another user")
	}
	both(t, func(t *testing.T) {
		p, _ := tree(t)
		if err := os.Mkdir(filepath.Join(p, "a"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := open(t, p).MkdirAll("a/b", 0o700, 65534, 65534)
		if !errors.Is(err, ErrOwner) {
			t.Fatalf("a root directory in the principal's tree: %v, want ErrOwner", err)
		}
		if _, err := os.Lstat(filepath.Join(p, "a", "b")); !os.IsNotExist(err) {
			t.Fatal("b was made inside another user's directory")
		}
		if _, err := open(t, p).OpenDir("a", 65534); !errors.Is(err, ErrOwner) {
			t.Fatalf("OpenDir with another owner: %v", err)
		}
	})
}

func TestRemoveAllFollowsNoLink(t *testing.T) {
	both(t, func(t *testing.T) {
		p, victim := tree(t)
		top := filepath.Join(p, "tmp")
		for _, d := range []string{"a/b/c", "d"} {
			if err := os.MkdirAll(filepath.Join(top, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range []string{"l1", "a/l2", "a/b/c/l3"} {
			if err := os.Symlink(victim, filepath.Join(top, l)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(filepath.Join(victim, "file"), filepath.Join(top, "d", "f")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(top, "a", "b", "x"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		before := fstree.Take(t, victim)
		if err := open(t, p).RemoveAll("tmp"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(top); !os.IsNotExist(err) {
			t.Fatalf("%s is still there: %v", top, err)
		}
		fstree.Unchanged(t, "victim", before, fstree.Take(t, victim))
		// The entry itself a link: the link goes, the target stays.
		if err := os.Symlink(victim, filepath.Join(p, "link")); err != nil {
			t.Fatal(err)
		}
		if err := open(t, p).RemoveAll("link"); err != nil {
			t.Fatal(err)
		}
		fstree.Unchanged(t, "victim", before, fstree.Take(t, victim))
		if err := open(t, p).RemoveAll("absent"); err != nil {
			t.Fatalf("an absent entry: %v", err)
		}
		if err := open(t, p).RemoveAll("../victim"); err == nil {
			t.Fatal("RemoveAll accepted a path leaving the directory")
		}
	})
}

func TestRemoveAllStaysOnItsFileSystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	p, _ := tree(t)
	mnt := filepath.Join(p, "tmp", "mnt")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(mnt, "other-fs"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := open(t, p).RemoveAll("tmp"); err == nil {
		t.Fatal("RemoveAll reported success over a mount point")
	}
	if _, err := os.Stat(filepath.Join(mnt, "other-fs")); err != nil {
		t.Fatalf("a file on the mounted file system was removed: %v", err)
	}
}

func TestMkdirAllAndRemoveAllUnderSwaps(t *testing.T) {
	both(t, func(t *testing.T) {
		p, victim := tree(t)
		// p/x is a real directory holding sub/, p/y a link to the victim
		// (which holds sub/ too); the racer exchanges them without pause.
		if err := os.MkdirAll(filepath.Join(p, "x", "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(p, "y")); err != nil {
			t.Fatal(err)
		}
		before := fstree.Take(t, victim)
		sw := fstree.Swap(filepath.Join(p, "x"), filepath.Join(p, "y"), nil)
		root := open(t, p)
		// At least 3000 rounds, and until 10 of them found the real
		// directory (both outcomes are exercised).
		rounds, made := 0, 0
		for ; (rounds < 3000 || made < 10) && rounds < 300000; rounds++ {
			d, err := root.MkdirAll("x/sub/new/deeper", 0o700, -1, -1)
			if err == nil {
				made++
				d.Close()
				// Remove what was made, through descriptors, while the
				// swaps go on.
				if sub, err := root.OpenDir("x/sub", -1); err == nil {
					if err := sub.RemoveAll("new"); err != nil {
						t.Errorf("RemoveAll: %v", err)
					}
					sub.Close()
				}
			}
		}
		swaps, err := sw.Stop()
		if err != nil {
			t.Errorf("swap: %v", err)
		}
		fstree.Unchanged(t, "victim", before, fstree.Take(t, victim))
		t.Logf("%d rounds, %d made through the real directory, %d swaps", rounds, made, swaps)
		if made == 0 {
			t.Error("no round found the real directory: the test did not exercise the success path")
		}
	})
}

// Mkdir makes a missing directory with its mode (not the umask's) and says
// so, opens one that exists as it is, and refuses a link or a file where
// the directory would be.
func TestMkdirMakesOrOpens(t *testing.T) {
	p, victim := tree(t)
	d, err := Open(p, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sub, made, err := d.Mkdir("new", 0o711)
	if err != nil || !made {
		t.Fatalf("a new directory: made %v, %v", made, err)
	}
	sub.Close()
	if st, err := os.Lstat(filepath.Join(p, "new")); err != nil || !st.IsDir() || st.Mode().Perm() != 0o711 {
		t.Fatalf("the new directory: %v, %v", st, err)
	}
	if err := os.Chmod(filepath.Join(p, "new"), 0o750); err != nil {
		t.Fatal(err)
	}
	sub, made, err = d.Mkdir("new", 0o711)
	if err != nil || made {
		t.Fatalf("an existing directory: made %v, %v", made, err)
	}
	sub.Close()
	if st, err := os.Lstat(filepath.Join(p, "new")); err != nil || st.Mode().Perm() != 0o750 {
		t.Fatalf("an existing directory was changed: %v, %v", st, err)
	}
	if err := os.Symlink(victim, filepath.Join(p, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link", "file"} {
		if sub, _, err := d.Mkdir(name, 0o711); err == nil {
			sub.Close()
			t.Errorf("Mkdir(%s) opened it", name)
		}
	}
}
