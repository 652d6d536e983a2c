package config

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// validateGitIdentity checks git_identity: every entry names a principal and
// has a name and an email git accepts (no line breaks, no angle brackets).
func (c *Config) validateGitIdentity() error {
	keys := make([]string, 0, len(c.GitIdentity))
	for k := range c.GitIdentity {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		id := c.GitIdentity[k]
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("git_identity: an entry has an empty key; use a user name, a numeric uid or token:NAME")
		}
		for _, f := range []struct{ field, v string }{{"name", id.Name}, {"email", id.Email}} {
			if strings.TrimSpace(f.v) == "" {
				return fmt.Errorf("git_identity.%s.%s: empty; give both name and email (e.g. {name: \"Alice Example\", email: alice@example.com})", k, f.field)
			}
			if strings.ContainsAny(f.v, "<>\n\r\x00") {
				return fmt.Errorf("git_identity.%s.%s: %q must not contain <, > or a line break (git would drop or reject them)", k, f.field, f.v)
			}
		}
	}
	return nil
}

// GitIdentityFor is the git identity of a principal: the git_identity
// entry for its name (a user name or token:NAME) or its uid, else
// "NAME (via termd) <NAME@HOST>". source is "config" or "default".
func (c *Config) GitIdentityFor(name string, uid uint32) (id GitIdentity, source string) {
	if v, ok := c.GitIdentity[name]; ok && name != "" {
		return v, "config"
	}
	if v, ok := c.GitIdentity[strconv.FormatUint(uint64(uid), 10)]; ok {
		return v, "config"
	}
	who := strings.TrimPrefix(name, "token:")
	if who == "" {
		who = "uid" + strconv.FormatUint(uint64(uid), 10)
	}
	who = strings.Map(func(r rune) rune {
		if r == '<' || r == '>' || r == '\n' || r == '\r' || r == 0 || r == ' ' {
			return '-'
		}
		return r
	}, who)
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return GitIdentity{Name: who + " (via termd)", Email: who + "@" + host}, "default"
}
