package executions

import (
	"slices"
	"strings"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/credentials"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Credentials by reference (docs/CREDENTIALS.md). The policy decides names;
// CredentialScopes tells it which credentials a caller may ask for;
// InjectCredentials reads values when an execution starts (never before,
// never cached) for the child, which gets them through the launcher once the
// intent is durable, and the execution's redactor removes them (and their
// encoded forms, RedactionForms) from everything it produces.

// configRole is the config's role for a principal's: its API name read as
// config reads a role's name (RoleNone for none).
func configRole(p *termdv1.Principal) config.Role {
	r, _ := config.RoleFromName(p.GetRole().String())
	return r
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

// CredentialScopes are the credentials caller may ask for, for the policy.
func CredentialScopes(cfg *config.Config, caller *termdv1.Principal) map[string]policy.CredentialScope {
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
func ListCredentials(cfg *config.Config, caller *termdv1.Principal) []*termdv1.CredentialInfo {
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
	return out
}
