package hostfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func TestCallerCanReadFollowsModeBits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own files another uid cannot read")
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	open := filepath.Join(dir, "open.txt")
	secret := filepath.Join(dir, "secret.txt")
	os.WriteFile(open, []byte("x"), 0o644)
	os.WriteFile(secret, []byte("x"), 0o600)
	private := filepath.Join(dir, "private")
	os.Mkdir(private, 0o700)
	inside := filepath.Join(private, "f.txt")
	os.WriteFile(inside, []byte("x"), 0o644)
	nobody := &termdv1.Principal{Uid: 65534, Gid: 65534}
	root := &termdv1.Principal{Uid: 0}
	for _, c := range []struct {
		p    *termdv1.Principal
		path string
		dir  bool
		want bool
	}{
		{nobody, open, false, true},
		{nobody, secret, false, false},
		{nobody, inside, false, false}, // the directory on the way is not searchable
		{nobody, private, true, false},
		{root, secret, false, true},
	} {
		if got := callerCanRead(c.p, c.path, c.dir); got != c.want {
			t.Errorf("uid %d reading %s: %v, want %v", c.p.Uid, c.path, got, c.want)
		}
	}
	// The owner reads its own 0600 file.
	os.Chown(secret, 65534, 65534)
	if !callerCanRead(nobody, secret, false) {
		t.Error("the owner should read its own file")
	}
}

func TestWalkAsCallerListsOnlyWhatTheCallerCouldList(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a directory another uid cannot list")
	}
	root := t.TempDir()
	os.Chmod(filepath.Dir(root), 0o755)
	os.Chmod(root, 0o755)
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("a"), 0o644)
	os.Mkdir(filepath.Join(root, "private"), 0o700)
	os.WriteFile(filepath.Join(root, "private", "secret.txt"), []byte("s"), 0o600)
	os.Mkdir(filepath.Join(root, "sub"), 0o755)
	os.WriteFile(filepath.Join(root, "sub", "b.txt"), []byte("bb"), 0o644)
	os.Symlink(filepath.Join(root, "private"), filepath.Join(root, "link")) // never followed
	list := func(p *termdv1.Principal) []string {
		var got []string
		err := walkAsCaller(p, root, func(string, string) bool { return false }, func(path string, n int64) bool {
			rel, _ := filepath.Rel(root, path)
			got = append(got, rel)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	nobody := list(&termdv1.Principal{Uid: 65534, Gid: 65534})
	if fmt.Sprint(nobody) != "[a.txt sub/b.txt]" {
		t.Fatalf("nobody lists %v", nobody)
	}
	if rootList := list(&termdv1.Principal{Uid: 0}); fmt.Sprint(rootList) != "[a.txt private/secret.txt sub/b.txt]" {
		t.Fatalf("root lists %v", rootList)
	}
}

// callerCanRead says whether the caller could read path (an absolute,
// resolved path; dir: also search it), checked on descriptors like every
// workspace access.
func callerCanRead(p *termdv1.Principal, path string, dir bool) bool {
	f, err := openAsCaller(p, path)
	if err != nil {
		return false
	}
	defer f.Close()
	return !dir || newFDAccess(p).allowed(int(f.Fd()), 5) == nil
}

// Taking on a caller's credentials changes one locked thread only, and only
// while the check runs: root's own reads elsewhere in the daemon keep working.
func TestAsCallerLeavesTheDaemonsCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to take on another uid")
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "root-only")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	nobody := &termdv1.Principal{Uid: 65534, Gid: 65534}
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := 0; i < 200; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if callerCanRead(nobody, secret, false) {
				errs <- fmt.Errorf("nobody read root's 0600 file")
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := os.ReadFile(secret); err != nil {
				errs <- fmt.Errorf("root could not read its own file while callers were checked: %v", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
