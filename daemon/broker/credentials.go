package broker

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/credentials"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Credentials by reference (docs/CREDENTIALS.md). The policy decides names;
// the broker tells it which credentials a caller may ask for, reads values
// when an execution starts (never before, never cached), hands them to the
// child through the launcher once the intent is durable, and redacts them
// (and their encoded forms) from everything that execution produces.

// configRole is the config's word for a principal's role.
func configRole(p *termdv1.Principal) config.Role {
	switch p.GetRole() {
	case termdv1.Role_ROLE_OPERATOR:
		return config.RoleOperator
	case termdv1.Role_ROLE_AGENT:
		return config.RoleAgent
	case termdv1.Role_ROLE_VIEWER:
		return config.RoleViewer
	}
	return config.RoleNone
}

// mayAsk says whether caller may ask for cr.
func mayAsk(caller *termdv1.Principal, cr config.Credential) bool {
	if caller == nil {
		return false
	}
	if caller.Cert != "" {
		// A certificate's principal is not a local uid, user, group or
		// gateway token: only an entry open to anyone, or to its role, applies.
		return cr.Principals.Empty() || slices.Contains(cr.Principals.Roles, configRole(caller).String())
	}
	token := ""
	if t, ok := strings.CutPrefix(caller.Name, "token:"); ok {
		token = t
	}
	return cr.Principals.Has(caller.Uid, caller.Gid, configRole(caller), token)
}

// credentialScopes are the credentials caller may ask for, for the policy.
func (b *Broker) credentialScopes(caller *termdv1.Principal) map[string]policy.CredentialScope {
	cfg := b.Config()
	if len(cfg.Credentials) == 0 {
		return nil
	}
	out := map[string]policy.CredentialScope{}
	for _, cr := range cfg.Credentials {
		if mayAsk(caller, cr) {
			out[cr.Name] = policy.CredentialScope{Programs: slices.Clone(cr.Programs)}
		}
	}
	return out
}

// ListCredentials lists credentials without values: every one for
// operators, the ones an agent may ask for, none for viewers (they cannot
// plan).
func (b *Broker) ListCredentials(_ context.Context, caller *termdv1.Principal) ([]*termdv1.CredentialInfo, error) {
	cfg := b.Config()
	var out []*termdv1.CredentialInfo
	for _, cr := range cfg.Credentials {
		if !domain.IsOperator(caller) && (caller.GetRole() != termdv1.Role_ROLE_AGENT || !mayAsk(caller, cr)) {
			continue
		}
		info := &termdv1.CredentialInfo{
			Name: cr.Name, Programs: slices.Clone(cr.Programs), Principals: cr.Principals.Describe(),
			Source: cr.SourceKind(), Inject: cr.Inject,
		}
		switch info.Source {
		case "file":
			info.Path = cr.File
		case "store":
			info.Path = cfg.CredentialsFile
		}
		if info.Inject == "" {
			info.Inject = "env"
		}
		info.Readable, info.Problem = credentials.Readable(cr, cfg.CredentialsFile)
		if !domain.IsOperator(caller) {
			// An agent learns what it may ask for and for which programs,
			// never where the secret lives or who else may have it.
			info.Source, info.Path, info.Principals = "", "", nil
			if !info.Readable {
				info.Problem = "its source cannot be read now; an operator sees why in `termctl credentials`"
			}
		}
		out = append(out, info)
	}
	return out, nil
}

// injectCredentials reads the values of the credentials d names (now: a
// rotated file takes effect at the next execution), sets them in env
// (inject: env) or writes each to a 0600 file owned by the command's user in
// its private TMPDIR (inject: file), and returns the values for the
// execution's redactor. Errors name the credential and the fix, never a
// value.
func (b *Broker) injectCredentials(d policy.Decision, env map[string]string, tmp string, uid, gid int) ([]string, error) {
	cfg := b.Config()
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
		if err := writePrivate(path, v, uid, gid); err != nil {
			return nil, errdefs.Internal("writing credential %s to the execution's TMPDIR: %v", name, err)
		}
		env[name] = path
	}
	return values, nil
}

// writePrivate writes v to a new 0600 file owned by uid/gid.
func writePrivate(path, v string, uid, gid int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if err := f.Chown(uid, gid); err != nil {
			f.Close()
			return err
		}
	}
	if _, err := f.WriteString(v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// redactionForms are the forms of a value redacted from an execution's
// output: the value, its hex, URL escapes, and base64 (standard and URL
// alphabets). For base64, the characters that depend only on the value are
// taken at each of the three alignments it can have inside a longer
// encoded text (an HTTP Basic header encodes "user:value"), so the value is
// caught wherever it sits; a character or two at each edge, which mixes in
// its neighbours' bits, may remain.
func redactionForms(v string) []string {
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
