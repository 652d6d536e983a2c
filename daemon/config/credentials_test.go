package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Credential definitions are checked when the config loads: each bad entry
// is refused with what was wrong and what to do.
func TestCredentialDefinitionsAreValidated(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	if err := os.WriteFile(store, []byte("GH_TOKEN=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, []byte("GH_TOKEN=x\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"credentials:\n  - file: /etc/x\n", "name is missing"},
		{"credentials:\n  - name: gh_token\n    file: /etc/x\n", "not an environment variable name in capitals"},
		{"credentials:\n  - name: GH-TOKEN\n    file: /etc/x\n", "not an environment variable name"},
		{"credentials:\n  - name: PATH\n    file: /etc/x\n", "give the credential another name"},
		{"credentials:\n  - name: LD_PRELOAD\n    file: /etc/x\n", "give the credential another name"},
		{"credentials:\n  - name: A_TOKEN\n    file: /etc/x\n  - name: A_TOKEN\n    file: /etc/y\n", "defined twice"},
		{"credentials:\n  - name: A_TOKEN\n    file: etc/x\n", "must be an absolute path"},
		{"credentials:\n  - name: A_TOKEN\n    file: /etc/x\n    value: abcdefghij\n", "either value or file"},
		{"credentials:\n  - name: A_TOKEN\n", "no source"},
		{"credentials:\n  - name: A_TOKEN\n    file: /etc/x\n    inject: fd\n", `inject "fd" is not env or file`},
		{"credentials:\n  - name: A_TOKEN\n    file: /etc/x\n    programs: [bin/git]\n", "program name (git) or an absolute path"},
		{"credentials:\n  - name: A_TOKEN\n    file: /etc/x\n    principals: {users: [no-such-user-termd]}\n", `unknown user "no-such-user-termd"`},
		{"credentials:\n  - name: A_TOKEN\n    file: /etc/x\n    principals: {roles: [viewer]}\n", "viewers cannot plan"},
		{"credentials:\n  - name: A_TOKEN\n    value: abcdefghijk\n", "needs a config file of mode 0600"},
		{"credentials_file: relative\n", "must be an absolute path"},
		{"credentials_file: " + loose + "\n", "chmod 600 " + loose},
		{"credentials:\n  - name: A_TOKEN\n    fille: /etc/x\n", `did you mean "file"`},
		{"credentials:\n  - name: A_TOKEN\n    programms: [git]\n", `did you mean "programs"`},
	} {
		cfg := Default()
		err := Parse(cfg, []byte(c.yaml))
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.yaml, err, c.want)
		}
	}
	good := "credentials_file: " + store + "\ncredentials:\n  - name: GH_TOKEN\n    programs: [git, /usr/bin/curl]\n    principals: {roles: [agent], tokens: [ci]}\n  - name: NPM_TOKEN\n    file: /etc/termd/npm\n    inject: file\n"
	cfg := Default()
	if err := Parse(cfg, []byte(good)); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a good credentials section was refused: %v", err)
	}
	if cr, ok := cfg.CredentialNamed("GH_TOKEN"); !ok || cr.SourceKind() != "store" {
		t.Fatalf("GH_TOKEN: %+v %v", cr, ok)
	}

	// A value in the config is accepted only in a private config file.
	path := filepath.Join(dir, "termd.yaml")
	if err := os.WriteFile(path, []byte("credentials:\n  - name: A_TOKEN\n    value: abcdefghijk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Fatalf("a world-readable config holding a value: %v", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a 0600 config holding a value: %v", err)
	}
}

// Principal scoping: a token caller is matched by its token or role, never
// by the gateway's uid.
func TestCredentialPrincipals(t *testing.T) {
	p := CredentialPrincipals{UIDs: []uint32{4242}, Tokens: []string{"ci"}}
	if !p.Has(4242, 4242, RoleAgent, "") || p.Has(4243, 4243, RoleAgent, "") {
		t.Fatal("uid scoping")
	}
	if p.Has(4242, 4242, RoleAgent, "other") || !p.Has(4242, 4242, RoleAgent, "ci") {
		t.Fatal("a token caller must match by token name only")
	}
	if !(CredentialPrincipals{}).Has(1, 1, RoleAgent, "x") {
		t.Fatal("empty principals let every planner ask")
	}
	if !(CredentialPrincipals{Roles: []string{"operator"}}).Has(1, 1, RoleOperator, "") {
		t.Fatal("role scoping")
	}
}

func TestGitIdentityConfig(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"git_identity:\n  alice: {name: Alice}\n", "git_identity.alice.email: empty"},
		{"git_identity:\n  alice: {name: \"A <x>\", email: a@example.com}\n", "must not contain <"},
		{"git_identity:\n  alice: {name: Alice, mail: a@example.com}\n", `unknown key "mail"`},
	} {
		c := Default()
		err := Parse(c, []byte(tc.yaml))
		if err == nil {
			err = c.validateGitIdentity()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error containing %q", tc.yaml, err, tc.want)
		}
	}
	c := Default()
	if err := Parse(c, []byte("git_identity:\n  alice: {name: Alice Example, email: alice@example.com}\n  \"1001\": {name: U, email: u@example.com}\n")); err != nil || c.validateGitIdentity() != nil {
		t.Fatal(err)
	}
	if id, src := c.GitIdentityFor("alice", 1000); id.Name != "Alice Example" || src != "config" {
		t.Fatalf("by name: %v %s", id, src)
	}
	if id, src := c.GitIdentityFor("bob", 1001); id.Email != "u@example.com" || src != "config" {
		t.Fatalf("by uid: %v %s", id, src)
	}
	if id, src := c.GitIdentityFor("token:ci", 0); id.Name != "ci (via termd)" || !strings.HasPrefix(id.Email, "ci@") || src != "default" {
		t.Fatalf("default for a token: %v %s", id, src)
	}
}
