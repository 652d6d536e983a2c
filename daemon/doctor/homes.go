package doctor

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/broker/hostfs"
	"github.com/termd/termd/daemon/config"
)

// homeChecks: the base of the commands' private homes (<state>-home, or a
// private one in the temporary directory), its .tmp (the executions'
// TMPDIRs) and the HOME of each configured principal that runs commands
// (roles.operators and roles.agents, by uid or user; root and termd's own
// user) exist or can be made, are directories and not links, have the
// owner and mode termd needs, and are on a writable file system. What termd
// fixes itself at the next execution (a mode, a HOME's owner when termd is
// root) is a warning; what makes every execution fail is a failure.
func homeChecks(c *config.Config, termdUID uint32) []Check {
	base, private := hostfs.HomeBase(c.StateDir, c.Workspaces)
	if private && base == "" {
		where := os.TempDir()
		if err := writableFS(where); err != nil {
			return []Check{{Area: "homes", Status: Fail, Message: "the commands' homes go in a private directory under " + where + " (the directory beside the state directory is inside a workspace or others can write its parent), but " + err.Error(),
				Fix: "make " + where + " writable, or put state_dir in a directory only root can write, outside the workspaces"}}
		}
		return []Check{{Area: "homes", Status: OK, Message: "the commands' homes and TMPDIRs go in a private directory termd makes under " + where + " at the first execution (the directory beside the state directory is inside a workspace or others can write its parent)"}}
	}
	// A private base termd finds unusable is replaced by a new one: only a
	// warning. The sibling base is refused: every execution fails.
	bad := Fail
	if private {
		bad = Warn
	}
	var cs []Check
	tmp := filepath.Join(base, ".tmp")
	cs = append(cs, baseDirCheck(base, "the base of the commands' private homes", bad, termdUID))
	cs = append(cs, baseDirCheck(tmp, "the base of the executions' TMPDIRs", bad, termdUID))
	for _, p := range homeOwners(c, termdUID) {
		cs = append(cs, homeCheck(filepath.Join(base, strconv.FormatUint(uint64(p.uid), 10)), p, termdUID))
	}
	return cs
}

type homeOwner struct {
	uid  uint32
	name string
}

// homeOwners are the principals whose commands get a private HOME: root,
// termd's user and the uids and users of roles.operators and roles.agents
// (groups are not listed: their members get theirs at their first run).
func homeOwners(c *config.Config, termdUID uint32) []homeOwner {
	seen := map[uint32]string{}
	add := func(uid uint32, name string) {
		if _, ok := seen[uid]; !ok {
			if name == "" {
				if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
					name = u.Username
				} else {
					name = "uid " + strconv.FormatUint(uint64(uid), 10)
				}
			}
			seen[uid] = name
		}
	}
	add(0, "root")
	add(termdUID, "")
	for _, ps := range []config.Principals{c.Roles.Operators, c.Roles.Agents} {
		for _, u := range ps.UIDs {
			add(u, "")
		}
		for _, n := range ps.Users {
			if u, err := user.Lookup(n); err == nil {
				if id, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
					add(uint32(id), n)
				}
			}
		}
	}
	var out []homeOwner
	for uid, name := range seen {
		out = append(out, homeOwner{uid, name})
	}
	slices.SortFunc(out, func(a, b homeOwner) int { return int(int64(a.uid) - int64(b.uid)) })
	return out
}

// baseDirCheck checks a directory of termd's own that it makes when missing
// (mode 0711: others may pass through to their HOME or TMPDIR, not list).
func baseDirCheck(dir, what string, bad Status, termdUID uint32) Check {
	st, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		// Made with its missing parents (the base, then .tmp): the nearest
		// one that exists must be a writable directory.
		parent := filepath.Dir(dir)
		for parent != filepath.Dir(parent) {
			if _, err := os.Lstat(parent); !errors.Is(err, os.ErrNotExist) {
				break
			}
			parent = filepath.Dir(parent)
		}
		if err := writableFS(parent); err != nil {
			return Check{Area: "homes", Status: bad, Message: what + " " + dir + " does not exist and cannot be made: " + err.Error(),
				Fix: "make " + parent + " a writable directory of root or termd's user (or move state_dir)"}
		}
		return Check{Area: "homes", Status: OK, Message: what + " " + dir + " does not exist yet: termd makes it (mode 0711) at the first execution"}
	}
	if c, done := notADir(dir, what, st, err, bad); done {
		return c
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	if sys != nil && sys.Uid != termdUID {
		return Check{Area: "homes", Status: bad, Message: fmt.Sprintf("%s %s is owned by uid %d, not termd's user (uid %d): termd refuses to work in it, so every execution fails", what, dir, sys.Uid, termdUID),
			Fix: fmt.Sprintf("chown %d %s (or remove it: termd makes it)", termdUID, dir)}
	}
	if err := writableFS(dir); err != nil {
		return Check{Area: "homes", Status: bad, Message: what + " " + dir + ": " + err.Error(), Fix: "remount its file system read-write, or move state_dir to a writable one"}
	}
	if m := st.Mode().Perm(); m != 0o711 {
		return Check{Area: "homes", Status: Warn, Message: fmt.Sprintf("%s %s has mode %04o, not 0711", what, dir, m),
			Fix: "chmod 711 " + dir + " (termd sets it at the next execution)"}
	}
	return Check{Area: "homes", Status: OK, Message: fmt.Sprintf("%s %s: a directory of termd's user, mode 0711, on a writable file system", what, dir)}
}

// homeCheck checks a principal's private HOME (mode 0700, owned by it when
// termd is root).
func homeCheck(home string, p homeOwner, termdUID uint32) Check {
	who := fmt.Sprintf("%s (uid %d)", p.name, p.uid)
	st, err := os.Lstat(home)
	if errors.Is(err, os.ErrNotExist) {
		return Check{Area: "homes", Status: OK, Message: "HOME of " + who + " " + home + " does not exist yet: termd makes it (mode 0700) at its first execution"}
	}
	if c, done := notADir(home, "HOME of "+who, st, err, Fail); done {
		return c
	}
	owner := p.uid
	if termdUID != 0 {
		owner = termdUID // user mode: every command runs as termd's user
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	if sys != nil && sys.Uid != owner {
		return Check{Area: "homes", Status: Warn, Message: fmt.Sprintf("HOME of %s %s is owned by uid %d, not %d", who, home, sys.Uid, owner),
			Fix: fmt.Sprintf("chown -R %d %s (termd as root gives the directory itself back at the next execution, not what is in it)", owner, home)}
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return Check{Area: "homes", Status: Warn, Message: fmt.Sprintf("HOME of %s %s has mode %04o: others may read the principal's caches and credentials", who, home, m),
			Fix: "chmod 700 " + home}
	}
	return Check{Area: "homes", Status: OK, Message: fmt.Sprintf("HOME of %s %s: its own directory, mode %04o", who, home, st.Mode().Perm())}
}

// notADir is the failure for a path that is a link or not a directory
// (done false when it is a directory).
func notADir(path, what string, st os.FileInfo, err error, bad Status) (Check, bool) {
	switch {
	case err != nil:
		return Check{Area: "homes", Status: bad, Message: what + " " + path + ": " + err.Error(), Fix: "make it readable by termd, or remove it: termd makes it"}, true
	case st.Mode()&os.ModeSymlink != 0:
		return Check{Area: "homes", Status: bad, Message: what + " " + path + " is a symbolic link: termd never follows one there, so executions that need it fail",
			Fix: "remove the link (rm " + path + "): termd makes the directory itself"}, true
	case !st.IsDir():
		return Check{Area: "homes", Status: bad, Message: what + " " + path + " is a " + kindOf(st) + ", not a directory: executions that need it fail",
			Fix: "move it away (mv " + path + " " + path + ".old): termd makes the directory itself"}, true
	}
	return Check{}, false
}

func kindOf(st os.FileInfo) string {
	switch {
	case st.Mode().IsRegular():
		return "regular file"
	case st.Mode()&os.ModeNamedPipe != 0:
		return "named pipe"
	case st.Mode()&os.ModeSocket != 0:
		return "socket"
	case st.Mode()&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// writableFS says why dir's file system cannot be written (nil when it
// can): a read-only mount, or dir missing.
func writableFS(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	// EROFS whoever asks (a permission refusal is doctor's uid, not the mount).
	if err := unix.Access(dir, unix.W_OK); errors.Is(err, unix.EROFS) {
		return fmt.Errorf("%s is on a read-only file system", dir)
	}
	return nil
}
