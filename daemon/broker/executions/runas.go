package executions

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/errdefs"
)

// TimeoutDetail says that a command ran out of time and how to ask for more:
// timeout_seconds (MCP) or --timeout (termctl), up to the policy's
// max_timeout.
func TimeoutDetail(timeout, max time.Duration) string {
	msg := fmt.Sprintf("the command ran for its time limit of %s and was ended", timeout)
	if max > timeout {
		return msg + fmt.Sprintf("; to give it longer, plan it again with a longer limit: timeout_seconds (MCP, e.g. %d) or termctl run --timeout %s; at most the policy's limits.max_timeout of %s", int(max.Seconds()), max, max)
	}
	return msg + "; that is the policy's limits.max_timeout: an operator may raise it (docs/POLICY.md), or split the work"
}

// JoinPath joins directories into a PATH value.
func JoinPath(dirs []string) string {
	out := ""
	for i, d := range dirs {
		if i > 0 {
			out += ":"
		}
		out += d
	}
	return out
}

// CredentialFor is the uid, gid and groups a command runs with. A uid (a
// plan runs as its requester by default) is looked up through
// config.LookupUID, the account cache the RPCs use (5 s, flushed on
// SIGHUP): reading the passwd and group files at every start was ~1% of
// termd's CPU per execution.
func CredentialFor(who string) (*syscall.Credential, error) {
	var u *user.User
	var ids []string
	err := errors.New("not a uid")
	if n, perr := strconv.ParseUint(who, 10, 32); perr == nil {
		var a *config.Account
		if a, err = config.LookupUID(uint32(n)); err == nil {
			u, ids = a.User, a.Groups
		}
	}
	if err != nil {
		if u, err = user.Lookup(who); err != nil {
			// A uid without a passwd entry still runs as itself.
			if n, perr := strconv.ParseUint(who, 10, 32); perr == nil {
				return &syscall.Credential{Uid: uint32(n), Gid: uint32(n)}, nil
			}
			return nil, err
		}
		ids, _ = u.GroupIds()
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	for _, g := range ids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			c.Groups = append(c.Groups, uint32(n))
		}
	}
	return c, nil
}

// RunAs is the credential a command runs with and its uid and gid: when
// termd is root, the plan's run-as user (runAs), else the requester's uid
// when commands run as their requester (runAsRequester); termd's own
// otherwise. A nil credential is termd's own (root keeps root).
func RunAs(runAs string, requesterUID uint32, runAsRequester bool) (*syscall.Credential, int, int, error) {
	uid, gid := os.Geteuid(), os.Getegid()
	if uid != 0 {
		return nil, uid, gid, nil
	}
	if runAs == "" && runAsRequester {
		runAs = strconv.FormatUint(uint64(requesterUID), 10)
	}
	if runAs == "" {
		return nil, uid, gid, nil
	}
	c, err := CredentialFor(runAs)
	if err != nil {
		return nil, 0, 0, errdefs.Precondition("cannot run as %s: %v", runAs, err)
	}
	if c.Uid == 0 && c.Gid == 0 {
		return nil, 0, 0, nil
	}
	return c, int(c.Uid), int(c.Gid), nil
}

// EnvList is env as NAME=value entries, sorted.
func EnvList(env map[string]string) []string {
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	sort.Strings(list)
	return list
}
