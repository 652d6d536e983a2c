package executions

import (
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/credentials"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
)

// InjectCredentials reads the values of the credentials d names (now: a
// rotated file takes effect at the next execution), sets them in env
// (inject: env) or writes each to a 0600 file owned by the command's user in
// its private TMPDIR (inject: file), and returns the values for the
// execution's redactor. Errors name the credential and the fix, never a
// value.
func InjectCredentials(cfg *config.Config, d policy.Decision, env map[string]string, tmp string, uid, gid int) ([]string, error) {
	var values []string
	for _, name := range d.Credentials {
		cr, ok := cfg.CredentialNamed(name)
		if !ok {
			return nil, errdefs.Precondition("credential %s is no longer defined in termd's config; replan without it", name)
		}
		v, err := credentials.Resolve(cr, cfg.CredentialsFile)
		if err != nil {
			return nil, errdefs.Precondition("the execution is refused: %v", err)
		}
		values = append(values, v)
		if cr.Inject != "file" {
			env[name] = v
			continue
		}
		path := filepath.Join(tmp, "termd-credential-"+name)
		if err := WritePrivate(path, v, uid, gid); err != nil {
			return nil, errdefs.Internal("writing credential %s to the execution's TMPDIR: %v", name, err)
		}
		env[name] = path
	}
	return values, nil
}

// WritePrivate writes v to a new 0600 file owned by uid/gid. Not
// os.OpenFile: it offers the file to the poller and sets it back to
// blocking, five system calls more than open, fchown, write and close (each
// execution writes its git identity so).
func WritePrivate(path, v string, uid, gid int) error {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	err = writeOwned(fd, v, uid, gid)
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// writeOwned gives fd to uid/gid (when termd is root) and writes v to it.
func writeOwned(fd int, v string, uid, gid int) error {
	if os.Geteuid() == 0 {
		if err := syscall.Fchown(fd, uid, gid); err != nil {
			return err
		}
	}
	for b := []byte(v); len(b) > 0; {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
}

// RedactionForms are the forms of a value redacted from an execution's
// output: the value, its hex, URL escapes, and base64 (standard and URL
// alphabets). For base64, the characters that depend only on the value are
// taken at each of the three alignments it can have inside a longer
// encoded text (an HTTP Basic header encodes "user:value"), so the value is
// caught wherever it sits; a character or two at each edge, which mixes in
// its neighbours' bits, may remain.
func RedactionForms(v string) []string {
	forms := []string{v, hex.EncodeToString([]byte(v)), url.QueryEscape(v), url.PathEscape(v)}
	for shift := 0; shift < 3; shift++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, shift), v...))
		start, end := (shift*8+5)/6, (shift+len(v))*8/6
		if end-start < 8 {
			continue
		}
		core := enc[start:end]
		forms = append(forms, core, strings.NewReplacer("+", "-", "/", "_").Replace(core))
	}
	return slices.Compact(slices.Sorted(slices.Values(forms)))
}
