package config

import (
	"fmt"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Credential is one named secret a plan may ask for by name
// (docs/CREDENTIALS.md). Its value comes from exactly one source: the
// config itself (value), a file read at each execution (file), or the
// credentials_file store (neither given).
type Credential struct {
	Name       string               `yaml:"name"`
	Value      string               `yaml:"value"`
	File       string               `yaml:"file"`
	Programs   []string             `yaml:"programs"`
	Principals CredentialPrincipals `yaml:"principals"`
	Inject     string               `yaml:"inject"`
	Note       string               `yaml:"note"`
}

// CredentialPrincipals says who may ask for a credential. Empty: every
// caller allowed to plan.
type CredentialPrincipals struct {
	UIDs   []uint32 `yaml:"uids"`
	Users  []string `yaml:"users"`
	Groups []string `yaml:"groups"`
	Roles  []string `yaml:"roles"`
	Tokens []string `yaml:"tokens"`
}

// Empty reports whether no principal is named (everyone who may plan).
func (p CredentialPrincipals) Empty() bool {
	return len(p.UIDs) == 0 && len(p.Users) == 0 && len(p.Groups) == 0 && len(p.Roles) == 0 && len(p.Tokens) == 0
}

// Has reports whether a caller is named. A caller acting for a gateway
// token (token != "") is matched by its token name or its role only: its
// uid is the gateway's, shared by every token holder.
func (p CredentialPrincipals) Has(uid, gid uint32, role Role, token string) bool {
	if p.Empty() {
		return true
	}
	if slices.Contains(p.Roles, role.String()) {
		return true
	}
	if token != "" {
		return slices.Contains(p.Tokens, token)
	}
	return Principals{UIDs: p.UIDs, Users: p.Users, Groups: p.Groups}.has(uid, callerGroups(uid, gid))
}

// Describe is the principals in words ("" when anyone may ask).
func (p CredentialPrincipals) Describe() []string {
	var out []string
	for _, u := range p.UIDs {
		out = append(out, fmt.Sprintf("uid:%d", u))
	}
	for _, u := range p.Users {
		out = append(out, "user:"+u)
	}
	for _, g := range p.Groups {
		out = append(out, "group:"+g)
	}
	for _, r := range p.Roles {
		out = append(out, "role:"+r)
	}
	for _, t := range p.Tokens {
		out = append(out, "token:"+t)
	}
	return out
}

// CredentialNameRE is the shape of a credential name: an environment
// variable name in capitals.
var CredentialNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// reservedCredentialNames are variables termd sets itself in every
// execution; a credential cannot replace them.
var reservedCredentialNames = []string{"PATH", "HOME", "LANG", "TERM", "NO_COLOR", "PAGER", "GIT_PAGER", "TMPDIR", "USER", "LOGNAME", "SHELL", "PWD"}

// SourceKind is where a credential's value comes from: "value", "file" or
// "store" (the credentials_file).
func (c Credential) SourceKind() string {
	switch {
	case c.Value != "":
		return "value"
	case c.File != "":
		return "file"
	}
	return "store"
}

// validateCredentials checks the definitions (not the values: those are
// read at each execution).
func (c *Config) validateCredentials() error {
	if c.CredentialsFile != "" {
		if !filepath.IsAbs(c.CredentialsFile) {
			return fmt.Errorf("credentials_file: %q must be an absolute path", c.CredentialsFile)
		}
		if err := CheckSecretFile(c.CredentialsFile); err != nil {
			return fmt.Errorf("credentials_file: %v", err)
		}
	}
	seen := map[string]bool{}
	inConfig := false
	for i, cr := range c.Credentials {
		at := fmt.Sprintf("credentials[%d]", i)
		if cr.Name == "" {
			return fmt.Errorf("%s: name is missing (an environment variable name such as GH_TOKEN)", at)
		}
		at = fmt.Sprintf("credentials[%d] (%s)", i, cr.Name)
		if !CredentialNameRE.MatchString(cr.Name) {
			return fmt.Errorf("%s: name %q is not an environment variable name in capitals ([A-Z_][A-Z0-9_]*, e.g. GH_TOKEN)", at, cr.Name)
		}
		if slices.Contains(reservedCredentialNames, cr.Name) || strings.HasPrefix(cr.Name, "TERMD_") || strings.HasPrefix(cr.Name, "LD_") || strings.HasPrefix(cr.Name, "DYLD_") {
			return fmt.Errorf("%s: %s is a variable termd or the loader uses for every execution; give the credential another name", at, cr.Name)
		}
		if seen[cr.Name] {
			return fmt.Errorf("%s: the name is defined twice; keep one entry", at)
		}
		seen[cr.Name] = true
		switch {
		case cr.Value != "" && cr.File != "":
			return fmt.Errorf("%s: give either value or file, not both", at)
		case cr.Value != "":
			inConfig = true
		case cr.File != "":
			if !filepath.IsAbs(cr.File) {
				return fmt.Errorf("%s: file %q must be an absolute path", at, cr.File)
			}
		case c.CredentialsFile == "":
			return fmt.Errorf("%s: no source: give file (a path read at each execution), or set credentials_file (a 0600 NAME=value store) holding %s", at, cr.Name)
		}
		switch cr.Inject {
		case "", "env", "file":
		default:
			return fmt.Errorf("%s: inject %q is not env or file", at, cr.Inject)
		}
		for _, p := range cr.Programs {
			if p == "" || (strings.Contains(p, "/") && !filepath.IsAbs(p)) || strings.ContainsAny(p, " \t*?") {
				return fmt.Errorf("%s: programs entry %q must be a program name (git) or an absolute path (/usr/bin/git)", at, p)
			}
		}
		for _, u := range cr.Principals.Users {
			if _, err := user.Lookup(u); err != nil {
				return fmt.Errorf("%s: principals.users: unknown user %q", at, u)
			}
		}
		for _, g := range cr.Principals.Groups {
			if _, err := lookupGroup(g); err != nil {
				return fmt.Errorf("%s: principals.groups: unknown group %q", at, g)
			}
		}
		for _, r := range cr.Principals.Roles {
			if r != "operator" && r != "agent" {
				return fmt.Errorf("%s: principals.roles: %q is not operator or agent (viewers cannot plan)", at, r)
			}
		}
	}
	if inConfig {
		if c.Source == "" {
			return fmt.Errorf("credentials: a value written in the config needs a config file of mode 0600; use file or credentials_file instead")
		}
		if err := CheckSecretFile(c.Source); err != nil {
			return fmt.Errorf("credentials: the config holds a credential value, so it must be private: %v (better: move the value to a file or credentials_file)", err)
		}
	}
	return nil
}

// CredentialNamed returns the definition of name.
func (c *Config) CredentialNamed(name string) (Credential, bool) {
	for _, cr := range c.Credentials {
		if cr.Name == name {
			return cr, true
		}
	}
	return Credential{}, false
}
