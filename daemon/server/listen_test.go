package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A socket put straight into a shared directory (like /tmp) is refused with
// a fix, and the directory keeps its mode: termd used to make it 0750,
// locking every other user out of /tmp.
func TestListenRefusesASharedDirectory(t *testing.T) {
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(filepath.Join(shared, "termd.sock"), "")
	if err == nil || !strings.Contains(err.Error(), "shared directory") {
		t.Fatalf("want a refusal naming the shared directory, got %v", err)
	}
	if st, _ := os.Stat(shared); st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Fatalf("the shared directory's mode changed to %v", st.Mode())
	}
	l, err := Listen(filepath.Join(shared, "termd", "termd.sock"), "")
	if err != nil {
		t.Fatalf("a directory of its own: %v", err)
	}
	l.Close()
}
