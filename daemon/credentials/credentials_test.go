package credentials

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/config"
)

const secret = "ghp_s3cretValue0123456789"

// A credential file is read at each use (rotation needs no restart) and
// refused, naming the file, the mode found and the fix, when others may
// read it; no error ever carries the value.
func TestResolveReadsPrivateFilesOnly(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "gh")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cr := config.Credential{Name: "GH_TOKEN", File: f}
	if v, err := Resolve(cr, ""); err != nil || v != secret {
		t.Fatalf("Resolve = %q, %v", v, err)
	}
	if err := os.WriteFile(f, []byte(secret+"-rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, _ := Resolve(cr, ""); v != secret+"-rotated" {
		t.Fatalf("rotation not seen: %q", v)
	}
	if err := os.Chmod(f, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err := Resolve(cr, "")
	if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), "0640") || !strings.Contains(err.Error(), "chmod 600 "+f) {
		t.Fatalf("group-readable file: %v", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatal("the error carries the value")
	}
	link := filepath.Join(dir, "link")
	if err := os.Chmod(f, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(config.Credential{Name: "GH_TOKEN", File: link}, ""); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("symlink: %v", err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(config.Credential{Name: "X_TOKEN", File: short}, ""); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("short value: %v", err)
	}
	if _, err := Resolve(config.Credential{Name: "X_TOKEN", File: filepath.Join(dir, "none")}, ""); err == nil || !strings.Contains(err.Error(), "cannot read") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestStore(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	if err := os.WriteFile(store, []byte("# tokens\n\nGH_TOKEN="+secret+"\nDB_URL=postgres://u:p=w@h/db\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := Resolve(config.Credential{Name: "DB_URL"}, store)
	if err != nil || v != "postgres://u:p=w@h/db" {
		t.Fatalf("DB_URL = %q, %v", v, err)
	}
	if _, err := Resolve(config.Credential{Name: "NPM_TOKEN"}, store); err == nil || !strings.Contains(err.Error(), "has no line NPM_TOKEN=") {
		t.Fatalf("missing entry: %v", err)
	}
	if _, err := ParseStore("s", []byte("GH_TOKEN "+secret+"\n")); err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad line: %v", err)
	}
	if err := os.Chmod(store, 0o604); err != nil {
		t.Fatal(err)
	}
	if ok, why := Readable(config.Credential{Name: "GH_TOKEN"}, store); ok || !strings.Contains(why, "0604") {
		t.Fatalf("world-readable store: %v %s", ok, why)
	}
}
