package broker

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Workspace reads run inside the daemon (as root when termd is root), so they
// check what the caller could read itself: the file must be readable, and
// every directory on the way searchable, by the caller's uid or groups.
// (Mode bits only; ACLs are not consulted, which can only refuse more.)

func callerIDs(p *termdv1.Principal) (uid uint32, gids map[uint32]bool) {
	uid = p.GetUid()
	gids = map[uint32]bool{p.GetGid(): true}
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		if ids, err := u.GroupIds(); err == nil {
			for _, g := range ids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					gids[uint32(n)] = true
				}
			}
		}
	}
	return uid, gids
}

// mayAccess says whether the caller has the permission bits want (4 read, 1 search) on path.
func mayAccess(uid uint32, gids map[uint32]bool, path string, want os.FileMode) bool {
	if uid == 0 {
		return true
	}
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := st.Mode().Perm()
	switch {
	case sys.Uid == uid:
		return mode&(want<<6) == want<<6
	case gids[sys.Gid]:
		return mode&(want<<3) == want<<3
	}
	return mode&want == want
}

// callerCanRead says whether the caller could read path (an absolute, resolved path).
func callerCanRead(p *termdv1.Principal, path string, dir bool) bool {
	if p.GetUid() == 0 {
		return true
	}
	uid, gids := callerIDs(p)
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if !mayAccess(uid, gids, d, 1) {
			return false
		}
		if d == "/" {
			break
		}
	}
	want := os.FileMode(4)
	if dir {
		want = 5
	}
	return mayAccess(uid, gids, path, want)
}
