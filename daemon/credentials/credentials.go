// Package credentials resolves credentials by reference (docs/CREDENTIALS.md):
// the value of a named credential from its source, read when an execution
// starts and never kept beyond it, and the checks a source must pass (a
// regular file owned by root or termd's user, readable by its owner only).
// It never logs a value and its errors never contain one.
package credentials

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/termd/termd/daemon/config"
)

// MaxValueBytes bounds a credential value (and a store file).
const MaxValueBytes = 64 << 10

// MinValueBytes is the shortest value termd injects: a shorter one could not
// be told apart from ordinary output, so it would not be redacted.
const MinValueBytes = 8

// Resolve reads the value of cr now. store is the config's credentials_file.
func Resolve(cr config.Credential, store string) (string, error) {
	var v string
	switch cr.SourceKind() {
	case "value":
		v = cr.Value
	case "file":
		data, err := ReadPrivate(cr.File)
		if err != nil {
			return "", fmt.Errorf("credential %s: %w", cr.Name, err)
		}
		v = trimNewline(string(data))
	default:
		if store == "" {
			return "", fmt.Errorf("credential %s has no source: set credentials_file or give the entry a file", cr.Name)
		}
		vals, err := ReadStore(store)
		if err != nil {
			return "", fmt.Errorf("credential %s: %w", cr.Name, err)
		}
		var ok bool
		if v, ok = vals[cr.Name]; !ok {
			return "", fmt.Errorf("credential %s: the credentials_file %s has no line %s=…; add it there", cr.Name, store, cr.Name)
		}
	}
	switch {
	case v == "":
		return "", fmt.Errorf("credential %s: the value is empty", cr.Name)
	case len(v) < MinValueBytes:
		return "", fmt.Errorf("credential %s: the value is shorter than %d bytes, too short to be redacted reliably from output; use a real secret", cr.Name, MinValueBytes)
	case strings.IndexByte(v, 0) >= 0:
		return "", fmt.Errorf("credential %s: the value contains a NUL byte, which an environment variable cannot hold", cr.Name)
	}
	return v, nil
}

func trimNewline(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return strings.TrimSuffix(s, "\r")
}

// ReadPrivate reads a secret file after checking it through the descriptor
// it reads from (so a swap after the check changes nothing): a regular file,
// not a symlink, owned by root or termd's own user, with no group or other
// permission bits, in a directory others cannot write to.
func ReadPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link; point the config at the file itself", path)
		}
		return nil, fmt.Errorf("cannot read %s: %v", path, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := CheckInfo(path, st); err != nil {
		return nil, err
	}
	if err := checkDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxValueBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %v", path, err)
	}
	if len(data) > MaxValueBytes {
		return nil, fmt.Errorf("%s is larger than %d KiB; a credential file holds one secret", path, MaxValueBytes>>10)
	}
	return data, nil
}

// CheckInfo refuses a secret file that is not private (see ReadPrivate).
func CheckInfo(path string, st os.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s); a credential source must be a plain file", path, st.Mode().Type())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %#o, so group or others may read it; a credential file must be readable by its owner only: chmod 600 %s", path, perm, path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if uid := int(sys.Uid); uid != 0 && uid != os.Geteuid() {
			return fmt.Errorf("%s is owned by uid %d; a credential file must be owned by root or by termd's user (uid %d): chown %d %s", path, uid, os.Geteuid(), os.Geteuid(), path)
		}
	}
	return nil
}

// checkDir refuses a directory others may write to without the sticky bit
// (they could replace the file between two executions).
func checkDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if perm := st.Mode(); perm.Perm()&0o022 != 0 && perm&os.ModeSticky == 0 {
		return fmt.Errorf("the directory %s has mode %#o, so others may replace the credential file in it; chmod go-w %s", dir, perm.Perm(), dir)
	}
	return nil
}

// ReadStore reads a credentials_file: NAME=value lines, blank lines and
// # comments. The value is everything after the first '=' (not unquoted).
func ReadStore(path string) (map[string]string, error) {
	data, err := ReadPrivate(path)
	if err != nil {
		return nil, err
	}
	return ParseStore(path, data)
}

// ParseStore parses the contents of a credentials_file. Errors name the
// line, never its value.
func ParseStore(path string, data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxValueBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || !config.CredentialNameRE.MatchString(name) {
			return nil, fmt.Errorf("%s line %d: want NAME=value with NAME like GH_TOKEN", path, n)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s line %d: %s is given twice", path, n, name)
		}
		out[name] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return out, nil
}

// Readable says whether cr's source can be read now, and if not, why (for
// `credentials list` and `termd doctor`; never the value).
func Readable(cr config.Credential, store string) (bool, string) {
	if _, err := Resolve(cr, store); err != nil {
		return false, err.Error()
	}
	return true, ""
}
