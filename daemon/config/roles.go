package config

import (
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// Role is what a caller may do.
type Role int

// Roles, weakest first.
const (
	RoleNone Role = iota
	RoleViewer
	RoleAgent
	RoleOperator
)

// roleWords are the roles' words in files, messages and (upper-cased,
// after ROLE_) the API's role names.
var roleWords = [...]string{RoleNone: "none", RoleViewer: "viewer", RoleAgent: "agent", RoleOperator: "operator"}

func (r Role) String() string {
	if r > RoleNone && int(r) < len(roleWords) {
		return roleWords[r]
	}
	return "none"
}

// RoleNamed is the role a word names: viewer, agent or operator; for none
// and any other word it is RoleNone and false.
func RoleNamed(w string) (Role, bool) {
	if i := slices.Index(roleWords[:], w); i > int(RoleNone) {
		return Role(i), true
	}
	return RoleNone, false
}

// RoleFromName reads a role a caller names: its word or its API name
// (viewer, ROLE_VIEWER), in any case; none and other names are RoleNone
// and false.
func RoleFromName(s string) (Role, bool) {
	return RoleNamed(strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "ROLE_")))
}

// RoleOf maps a caller's uid and primary gid to a role. Root and the daemon's
// own uid are operators; otherwise the strongest listed role wins, then the default.
func (c *Config) RoleOf(uid, gid uint32) Role {
	if uid == 0 || int(uid) == os.Geteuid() {
		return RoleOperator
	}
	groups := callerGroups(uid, gid)
	switch {
	case c.Roles.Operators.has(uid, groups):
		return RoleOperator
	case c.Roles.Agents.has(uid, groups):
		return RoleAgent
	case c.Roles.Viewers.has(uid, groups):
		return RoleViewer
	}
	switch c.Roles.Default {
	case "agent":
		return RoleAgent
	case "viewer":
		return RoleViewer
	}
	return RoleNone
}

func (p Principals) has(uid uint32, groups []string) bool {
	if slices.Contains(p.UIDs, uid) {
		return true
	}
	if len(p.Users) > 0 {
		if a, err := LookupUID(uid); err == nil && slices.Contains(p.Users, a.User.Username) {
			return true
		}
	}
	for _, g := range p.Groups {
		gid := g
		if _, err := strconv.Atoi(g); err != nil {
			grp, err := user.LookupGroup(g)
			if err != nil {
				continue
			}
			gid = grp.Gid
		}
		if slices.Contains(groups, gid) {
			return true
		}
	}
	return false
}

func callerGroups(uid, gid uint32) []string {
	groups := []string{strconv.FormatUint(uint64(gid), 10)}
	if a, err := LookupUID(uid); err == nil {
		groups = append(groups, a.Groups...)
	}
	return groups
}

// UserName returns the user name of uid, or "uid:N" when unknown.
func UserName(uid uint32) string {
	if a, err := LookupUID(uid); err == nil {
		return a.User.Username
	}
	return "uid:" + strconv.FormatUint(uint64(uid), 10)
}
