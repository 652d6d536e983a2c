package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/sandbox/launcher"
)

// A command run for root (uid 0) by a termd that is root holds no host root
// (invariant 12): the launcher enters a user namespace whose uid 0 is
// RootMap's unprivileged uid on the host, after binding the workspace roots,
// the private HOME and TMPDIR (and approved write targets) onto themselves
// idmapped through that namespace, so what it creates there is owned by root
// on the disk as before. Everywhere else root's files read as another
// user's and root-only sockets refuse it. Every other uid and gid maps to
// itself, so ownership of other users' files shows as it is.

// rootNS caches one user namespace per mapped uid: a namespace is only a
// mapping, shared by every execution that maps root to that uid.
var rootNS struct {
	sync.Mutex
	fds map[uint32]*os.File
	// idmap: per device, whether an idmapped mount of it works ("" = yes,
	// else why not).
	idmap map[uint64]string
}

// maxID is the highest valid uid/gid ((uid_t)-1 is not one).
const maxID = 1<<32 - 2

// rootMappings maps 0 to host uid to and every other id to itself, except
// to (which nothing inside maps to).
func rootMappings(to uint32) []syscall.SysProcIDMap {
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(to), Size: 1}}
	if to > 1 {
		m = append(m, syscall.SysProcIDMap{ContainerID: 1, HostID: 1, Size: int(to) - 1})
	}
	if to < maxID {
		m = append(m, syscall.SysProcIDMap{ContainerID: int(to) + 1, HostID: int(to) + 1, Size: maxID - int(to)})
	}
	return m
}

// rootUserNS returns a descriptor (the caller's own copy, to close) of the
// user namespace mapping root to host uid to, made the first time through
// launcherPath: a launcher started in a new user namespace waits on its
// configuration socket while the namespace is opened, and ends on its end of
// file.
func rootUserNS(launcherPath string, to uint32) (*os.File, error) {
	rootNS.Lock()
	defer rootNS.Unlock()
	f := rootNS.fds[to]
	if f == nil {
		var err error
		if f, err = newRootUserNS(launcherPath, to); err != nil {
			return nil, err
		}
		if rootNS.fds == nil {
			rootNS.fds = map[uint32]*os.File{}
		}
		rootNS.fds[to] = f
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: duplicating the root-mapping user namespace: %w", err)
	}
	return os.NewFile(uintptr(fd), "userns"), nil
}

func newRootUserNS(launcherPath string, to uint32) (*os.File, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "userns-holder"), os.NewFile(uintptr(pair[1]), "userns-holder-child")
	defer ours.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		theirs.Close()
		return nil, err
	}
	defer devnull.Close()
	maps := rootMappings(to)
	cmd := &exec.Cmd{
		Path:       launcherPath,
		Args:       []string{launcher.ArgvZero},
		ExtraFiles: []*os.File{theirs, devnull}, // ConfigFD, ReportFD
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: maps,
			GidMappings: maps,
			// termd writes the maps (it holds CAP_SETGID), so setgroups
			// stays allowed: the launcher sets the command's groups in it.
			// No Pdeathsig (it would fire if the forking thread ended
			// first): the launcher ends at its socket's end of file,
			// termd's exit included.
			GidMappingsEnableSetgroups: true,
		},
	}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: making the user namespace that maps root to uid %d: %w", to, err)
	}
	// Our unreaped child: its pid is not reused before Wait.
	f, oerr := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	ours.Close() // the launcher reads the end of file and exits
	_ = cmd.Wait()
	if oerr != nil {
		return nil, fmt.Errorf("sandbox: opening the user namespace that maps root to uid %d: %w", to, oerr)
	}
	return f, nil
}

// idmapWorks says whether path's file system takes an idmapped mount ("" =
// yes, else why not), trying one detached (never attached) in termd's own
// mount namespace; the answer is kept per device.
func idmapWorks(path string, ns *os.File) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Sprintf("%s: %v", path, err)
	}
	rootNS.Lock()
	defer rootNS.Unlock()
	if why, ok := rootNS.idmap[st.Dev]; ok {
		return why
	}
	why := ""
	tree, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err == nil {
		err = unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())})
		unix.Close(tree)
	}
	if err != nil {
		fs := "its file system"
		var sfs unix.Statfs_t
		if unix.Statfs(path, &sfs) == nil {
			fs = fmt.Sprintf("its file system (type 0x%x)", sfs.Type)
		}
		why = fmt.Sprintf("%s cannot be mounted idmapped: %s does not support idmapped mounts here (%v)", path, fs, err)
	}
	if rootNS.idmap == nil {
		rootNS.idmap = map[uint64]string{}
	}
	rootNS.idmap[st.Dev] = why
	return why
}

// CheckRootMap says whether a command run for root can hold host uid to
// instead, with dirs (the workspace roots) mounted idmapped: nil, or why not
// (termd doctor).
func CheckRootMap(launcherPath string, to uint32, dirs []string) error {
	ns, err := rootUserNS(launcherPath, to)
	if err != nil {
		return err
	}
	defer ns.Close()
	for _, d := range dirs {
		if why := idmapWorks(d, ns); why != "" {
			return &RootMapError{Why: why}
		}
	}
	return nil
}

// rootMapPaths are the trees the command's files are created in: bound
// idmapped so they stay root's on the disk. Nested ones are covered by
// their parent's mount.
func rootMapPaths(p domain.Profile, ps Paths) []string {
	var cand []string
	cand = append(cand, ps.Workspaces...)
	cand = append(cand, ps.Home, ps.Tmp)
	for _, w := range p.Write {
		if exists(w) {
			cand = append(cand, w)
		} else {
			cand = append(cand, filepath.Dir(w))
		}
	}
	var out []string
	for _, c := range uniqSorted(cand) {
		if c == "" || !filepath.IsAbs(c) || !exists(c) {
			continue
		}
		if real, err := filepath.EvalSymlinks(c); err == nil {
			c = real
		}
		nested := false
		for _, o := range out {
			if within(o, c) {
				nested = true
			}
		}
		if !nested {
			out = append(out, c)
		}
	}
	return out
}

// mapRoot adds to l what makes its command hold host uid to instead of root:
// the user namespace and the idmapped binds, which go before every other
// mount (covers and read-only binds inside them apply on top).
func mapRoot(l *launcher.Launch, p domain.Profile, ps Paths, sup Support) ([]launcher.Mount, error) {
	if !sup.MountNS || sup.UserNS {
		return nil, &RootMapError{Why: "private mount namespaces are not available, so the workspace cannot be mounted idmapped"}
	}
	ns, err := rootUserNS(sup.Launcher, ps.RootMap)
	if err != nil {
		return nil, &RootMapError{Why: err.Error()}
	}
	var mounts []launcher.Mount
	for _, dir := range rootMapPaths(p, ps) {
		if why := idmapWorks(dir, ns); why != "" {
			ns.Close()
			return nil, &RootMapError{Why: why}
		}
		mounts = append(mounts, launcher.Mount{Kind: "idmap", Path: dir})
	}
	l.Config.UserNSFD = launcher.FirstFD + len(l.Files)
	l.Files = append(l.Files, ns)
	return mounts, nil
}
