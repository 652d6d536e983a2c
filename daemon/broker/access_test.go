package broker

import (
	"os"
	"path/filepath"
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
