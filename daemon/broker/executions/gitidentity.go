package executions

import (
	"path/filepath"
	"strings"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// gitIdentityVars are the variables through which a request sets its own
// git identity; when it sets all four, termd supplies none.
var gitIdentityVars = []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}

// SupplyGitIdentity gives the command a git author/committer identity so
// `git commit` works in a fresh repository (instead of "Author identity
// unknown"): the principal's git_identity entry, or "NAME (via termd)
// <NAME@HOST>", as a config file in the private TMPDIR at git's lowest
// precedence, so a repository's own user.name and user.email, and
// GIT_AUTHOR_*/GIT_COMMITTER_* the request sets, still win, as on the
// principal's own machine:
//   - where the policy turned the global config off (git's exec_env:
//     GIT_CONFIG_GLOBAL=/dev/null, so the caller's ~/.gitconfig cannot set
//     hooks or helpers), the file, holding only [user], is the global
//     config instead;
//   - elsewhere (a build or script that runs git) it is the system config
//     (GIT_CONFIG_SYSTEM), and includes /etc/gitconfig after its [user];
//     HOME's ~/.gitconfig still applies over it;
//   - where the environment names its own config files, nothing is added.
//
// The file is share's link to a file of termd's holding the same (see
// hostfs.FS.LinkShared) or, where share cannot link one, a file of the
// command's user written for this execution.
//
// It returns what the receipt records (nil when nothing was supplied).
func SupplyGitIdentity(cfg *config.Config, env map[string]string, tmp string, requester *termdv1.Principal, uid, gid int, share func(dir, name, body string, uid int) error) (*receipt.GitIdentity, error) {
	if tmp == "" {
		return nil, nil
	}
	all := true
	for _, k := range gitIdentityVars {
		if _, set := env[k]; !set {
			all = false
		}
	}
	if all {
		return nil, nil
	}
	global, haveGlobal := env["GIT_CONFIG_GLOBAL"]
	_, haveSystem := env["GIT_CONFIG_SYSTEM"]
	_, noSystem := env["GIT_CONFIG_NOSYSTEM"]
	var key, include string
	switch {
	case haveGlobal && global == "/dev/null":
		key = "GIT_CONFIG_GLOBAL"
	case !haveGlobal && !haveSystem && !noSystem:
		key, include = "GIT_CONFIG_SYSTEM", "[include]\n\tpath = /etc/gitconfig\n"
	default:
		return nil, nil
	}
	id, source := cfg.GitIdentityFor(requester.GetName(), requester.GetUid())
	const name = "termd-gitconfig"
	path := filepath.Join(tmp, name)
	body := "# termd: the git identity of this execution when nothing else sets one (docs/RECEIPTS.md, git_identity)\n" +
		"[user]\n\tname = " + gitQuote(id.Name) + "\n\temail = " + gitQuote(id.Email) + "\n" + include
	if share == nil || share(tmp, name, body, uid) != nil {
		if err := WritePrivate(path, body, uid, gid); err != nil {
			return nil, errdefs.Internal("writing the git identity to the execution's TMPDIR: %v", err)
		}
	}
	env[key] = path
	return &receipt.GitIdentity{Name: id.Name, Email: id.Email, Source: source}, nil
}

// gitQuote writes v as a git config value: quoted, with \ and " escaped
// (the config refuses line breaks and angle brackets at load).
func gitQuote(v string) string {
	return `"` + gitQuoter.Replace(v) + `"`
}

// gitQuoter is made once: a Replacer builds its tables at its first use,
// 6 KiB at every execution when it was made per call.
var gitQuoter = strings.NewReplacer(`\`, `\\`, `"`, `\"`)
